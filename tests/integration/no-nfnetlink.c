/* no-nfnetlink.c — a test double for net.bats: LD_PRELOADed, it makes the
 * process see a kernel without nfnetlink (nftables), as a host without
 * nf_tables looks to lcrun. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/socket.h>
#include <linux/netlink.h>

int socket(int domain, int type, int protocol)
{
	static int (*real)(int, int, int);
	if (domain == AF_NETLINK && protocol == NETLINK_NETFILTER) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	if (!real)
		real = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
	return real(domain, type, protocol);
}
