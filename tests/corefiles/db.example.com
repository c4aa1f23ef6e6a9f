$ORIGIN example.com.
@	3600 IN	SOA ns.example.com. admin.example.com. 1 7200 3600 1209600 300
	3600 IN NS ns
ns      IN A     192.0.2.53
www     IN A     100.64.1.1
www     IN A     100.64.1.2
www     IN A     100.64.1.3
