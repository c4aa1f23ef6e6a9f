/* A stub resolver client: getaddrinfo(NAME) with AF_UNSPEC, as an application in a pod calls
 * it, through the C library it is linked with (glibc, or musl with musl-gcc). Prints each
 * address, or the error; exits 0 when the name resolved. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s NAME\n", argv[0]);
        return 2;
    }
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(argv[1], NULL, &hints, &res);
    if (rc != 0) {
        printf("error %s\n", gai_strerror(rc));
        return 1;
    }
    for (struct addrinfo *p = res; p; p = p->ai_next) {
        char text[INET6_ADDRSTRLEN];
        const void *addr = p->ai_family == AF_INET
            ? (const void *)&((struct sockaddr_in *)p->ai_addr)->sin_addr
            : (const void *)&((struct sockaddr_in6 *)p->ai_addr)->sin6_addr;
        if (inet_ntop(p->ai_family, addr, text, sizeof text)) {
            printf("%s\n", text);
        }
    }
    freeaddrinfo(res);
    return 0;
}
