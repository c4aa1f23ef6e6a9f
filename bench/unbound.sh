# Unbound configurations the bench scripts share (sourced, not run). Every instance is a
# foreground process on loopback that writes nothing outside its directory.

# unbound_server_head DIR PORT: the `server:` lines every bench Unbound starts with (one
# thread on 127.0.0.1@PORT, no daemon, no chroot, no log file, loopback clients only).
unbound_server_head() {
    cat <<EOF
server:
    interface: 127.0.0.1@$2
    port: $2
    do-ip6: no
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "$1"
    pidfile: ""
    use-syslog: no
    logfile: ""
    verbosity: 0
    num-threads: 1
    access-control: 127.0.0.0/8 allow
EOF
}

# unbound_example_net DIR PORT: writes DIR/unbound.conf for an Unbound on PORT that is
# authoritative only: every name under example.net is 192.0.2.1 (no AAAA), any other name
# NXDOMAIN, nothing goes to the internet (the autopath benchmarks' upstream).
unbound_example_net() {
    {
        unbound_server_head "$1" "$2"
        cat <<EOF
    ratelimit: 0
    local-zone: "." static
    local-zone: "example.net." redirect
    local-data: "example.net. 300 IN A 192.0.2.1"
remote-control:
    control-enable: no
EOF
    } >"$1/unbound.conf"
}
