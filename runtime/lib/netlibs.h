/* netlibs.h — libnl and libnftables, loaded when a network is first set up
 * or torn down rather than when lcrun starts.
 *
 * Most sandboxes have no network (--net none), and mapping and relocating
 * the two libraries and theirs (libnftnl, libxtables, libgmp, libmnl) cost
 * every lcrun process about 1 ms at start-up (contrib/bench/phases,
 * `lcrun --version`).  net.c and firewall.c include this header after the
 * libraries' own: each function they call is then a pointer in lc_netlibs,
 * filled by lc_netlibs_load(), which nl_open() and nft_open() call before
 * anything else.  The types come from the headers, so a changed signature
 * fails to build as before. */
#pragma once

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <nftables/libnftables.h>

#include "error.h"

/* The sonames of the ABI these headers describe. */
#define LC_LIBNL "libnl-3.so.200"
#define LC_LIBNL_ROUTE "libnl-route-3.so.200"
#define LC_LIBNFTABLES "libnftables.so.1"

#define LC_NETLIBS_NL(X) \
	X(nl_addr_parse) \
	X(nl_addr_put) \
	X(nl_addr_set_prefixlen) \
	X(nl_connect) \
	X(nl_geterror) \
	X(nl_socket_alloc) \
	X(nl_socket_free)

#define LC_NETLIBS_ROUTE(X) \
	X(rtnl_addr_add) \
	X(rtnl_addr_alloc) \
	X(rtnl_addr_put) \
	X(rtnl_addr_set_flags) \
	X(rtnl_addr_set_ifindex) \
	X(rtnl_addr_set_local) \
	X(rtnl_link_add) \
	X(rtnl_link_alloc) \
	X(rtnl_link_change) \
	X(rtnl_link_delete) \
	X(rtnl_link_get_ifindex) \
	X(rtnl_link_get_kernel) \
	X(rtnl_link_put) \
	X(rtnl_link_set_flags) \
	X(rtnl_link_set_name) \
	X(rtnl_link_set_ns_fd) \
	X(rtnl_link_veth_alloc) \
	X(rtnl_link_veth_get_peer) \
	X(rtnl_link_veth_release) \
	X(rtnl_route_add) \
	X(rtnl_route_add_nexthop) \
	X(rtnl_route_alloc) \
	X(rtnl_route_nh_alloc) \
	X(rtnl_route_nh_set_gateway) \
	X(rtnl_route_nh_set_ifindex) \
	X(rtnl_route_put) \
	X(rtnl_route_set_dst) \
	X(rtnl_route_set_family) \
	X(rtnl_route_set_protocol) \
	X(rtnl_route_set_scope) \
	X(rtnl_route_set_table)

#define LC_NETLIBS_NFT(X) \
	X(nft_ctx_buffer_error) \
	X(nft_ctx_buffer_output) \
	X(nft_ctx_free) \
	X(nft_ctx_get_error_buffer) \
	X(nft_ctx_get_output_buffer) \
	X(nft_ctx_new) \
	X(nft_ctx_output_set_flags) \
	X(nft_run_cmd_from_buffer)

#define LC_NETLIBS_FIELD(name) __typeof__(name) *name;
struct lc_netlibs {
	LC_NETLIBS_NL(LC_NETLIBS_FIELD)
	LC_NETLIBS_ROUTE(LC_NETLIBS_FIELD)
	LC_NETLIBS_NFT(LC_NETLIBS_FIELD)
};
#undef LC_NETLIBS_FIELD
extern struct lc_netlibs lc_netlibs;

/* Loads the libraries once per process (thread-safe); 0, or -1 with an
 * error naming the library that could not be loaded. */
int lc_netlibs_load(lc_error_t **err);

#ifndef LC_NETLIBS_IMPL
#define nl_addr_parse (lc_netlibs.nl_addr_parse)
#define nl_addr_put (lc_netlibs.nl_addr_put)
#define nl_addr_set_prefixlen (lc_netlibs.nl_addr_set_prefixlen)
#define nl_connect (lc_netlibs.nl_connect)
#define nl_geterror (lc_netlibs.nl_geterror)
#define nl_socket_alloc (lc_netlibs.nl_socket_alloc)
#define nl_socket_free (lc_netlibs.nl_socket_free)
#define rtnl_addr_add (lc_netlibs.rtnl_addr_add)
#define rtnl_addr_alloc (lc_netlibs.rtnl_addr_alloc)
#define rtnl_addr_put (lc_netlibs.rtnl_addr_put)
#define rtnl_addr_set_flags (lc_netlibs.rtnl_addr_set_flags)
#define rtnl_addr_set_ifindex (lc_netlibs.rtnl_addr_set_ifindex)
#define rtnl_addr_set_local (lc_netlibs.rtnl_addr_set_local)
#define rtnl_link_add (lc_netlibs.rtnl_link_add)
#define rtnl_link_alloc (lc_netlibs.rtnl_link_alloc)
#define rtnl_link_change (lc_netlibs.rtnl_link_change)
#define rtnl_link_delete (lc_netlibs.rtnl_link_delete)
#define rtnl_link_get_ifindex (lc_netlibs.rtnl_link_get_ifindex)
#define rtnl_link_get_kernel (lc_netlibs.rtnl_link_get_kernel)
#define rtnl_link_put (lc_netlibs.rtnl_link_put)
#define rtnl_link_set_flags (lc_netlibs.rtnl_link_set_flags)
#define rtnl_link_set_name (lc_netlibs.rtnl_link_set_name)
#define rtnl_link_set_ns_fd (lc_netlibs.rtnl_link_set_ns_fd)
#define rtnl_link_veth_alloc (lc_netlibs.rtnl_link_veth_alloc)
#define rtnl_link_veth_get_peer (lc_netlibs.rtnl_link_veth_get_peer)
#define rtnl_link_veth_release (lc_netlibs.rtnl_link_veth_release)
#define rtnl_route_add (lc_netlibs.rtnl_route_add)
#define rtnl_route_add_nexthop (lc_netlibs.rtnl_route_add_nexthop)
#define rtnl_route_alloc (lc_netlibs.rtnl_route_alloc)
#define rtnl_route_nh_alloc (lc_netlibs.rtnl_route_nh_alloc)
#define rtnl_route_nh_set_gateway (lc_netlibs.rtnl_route_nh_set_gateway)
#define rtnl_route_nh_set_ifindex (lc_netlibs.rtnl_route_nh_set_ifindex)
#define rtnl_route_put (lc_netlibs.rtnl_route_put)
#define rtnl_route_set_dst (lc_netlibs.rtnl_route_set_dst)
#define rtnl_route_set_family (lc_netlibs.rtnl_route_set_family)
#define rtnl_route_set_protocol (lc_netlibs.rtnl_route_set_protocol)
#define rtnl_route_set_scope (lc_netlibs.rtnl_route_set_scope)
#define rtnl_route_set_table (lc_netlibs.rtnl_route_set_table)
#define nft_ctx_buffer_error (lc_netlibs.nft_ctx_buffer_error)
#define nft_ctx_buffer_output (lc_netlibs.nft_ctx_buffer_output)
#define nft_ctx_free (lc_netlibs.nft_ctx_free)
#define nft_ctx_get_error_buffer (lc_netlibs.nft_ctx_get_error_buffer)
#define nft_ctx_get_output_buffer (lc_netlibs.nft_ctx_get_output_buffer)
#define nft_ctx_new (lc_netlibs.nft_ctx_new)
#define nft_ctx_output_set_flags (lc_netlibs.nft_ctx_output_set_flags)
#define nft_run_cmd_from_buffer (lc_netlibs.nft_run_cmd_from_buffer)
#endif
