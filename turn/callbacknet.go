package turn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// BlockedCallbackNets are the addresses no callback URL may reach unless
// CallbackPolicy.Allow lists them: unspecified and "this network" addresses,
// link-local ones (where the clouds' instance metadata services answer,
// 169.254.169.254 among them), AWS's IPv6 and Alibaba's metadata
// addresses, multicast and broadcast. Loopback and private addresses are
// reachable by default, since receivers often live next to turnd; list
// them in CallbackPolicy.Deny to block them.
var BlockedCallbackNets = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("100.100.100.200/32"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("255.255.255.255/32"),
}

// nat64 is the well-known NAT64 prefix (RFC 6052).
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// blockedCallbackHosts are names of metadata services, refused whatever
// they resolve to.
var blockedCallbackHosts = map[string]bool{
	"metadata.google.internal": true,
	"metadata.goog":            true,
}

// ErrCallbackBlocked is returned for a callback URL, or a connection of a
// webhook delivery, that would reach an address the CallbackPolicy blocks.
var ErrCallbackBlocked = errors.New("callback address blocked")

// CallbackPolicy decides which addresses sessions' callback URLs may reach.
// It is applied when a session is created (the URL's host, resolved) and to
// every connection a webhook delivery makes (the address dialled, so that a
// name that resolves elsewhere later is still refused). The zero value
// blocks BlockedCallbackNets.
type CallbackPolicy struct {
	// Allow lists networks reachable even though blocked (by default or by
	// Deny).
	Allow []netip.Prefix
	// Deny lists networks blocked besides BlockedCallbackNets.
	Deny []netip.Prefix
	// LookupHost resolves a callback URL's host name at session creation.
	// Default: net.DefaultResolver.LookupNetIP.
	LookupHost func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Permits reports whether a callback may reach ip.
func (p CallbackPolicy) Permits(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("") // a zoned address never matches a prefix
	if !ip.IsValid() {
		return false
	}
	if nat64.Contains(ip) {
		// The well-known NAT64 prefix reaches the IPv4 address it embeds.
		b := ip.As16()
		if !p.Permits(netip.AddrFrom4([4]byte(b[12:]))) {
			return false
		}
	}
	for _, n := range p.Allow {
		if n.Contains(ip) {
			return true
		}
	}
	for _, nets := range [][]netip.Prefix{BlockedCallbackNets, p.Deny} {
		for _, n := range nets {
			if n.Contains(ip) {
				return false
			}
		}
	}
	return true
}

// checkLiteral refuses a host that is a blocked metadata name or a blocked
// IP literal; it reports whether host is an IP literal.
func (p CallbackPolicy) checkLiteral(host string) (literal bool, err error) {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if blockedCallbackHosts[h] {
		return false, fmt.Errorf("%w: %s is a metadata service", ErrCallbackBlocked, h)
	}
	ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	if err != nil {
		return false, nil
	}
	if !p.Permits(ip) {
		return true, fmt.Errorf("%w: %s", ErrCallbackBlocked, ip)
	}
	return true, nil
}

// callbackLookupTimeout bounds resolving a callback URL's host when a
// session is created.
const callbackLookupTimeout = 3 * time.Second

// checkHost refuses a host that is blocked or resolves to a blocked
// address. A name that does not resolve now is accepted: deliveries are
// checked again when they connect.
func (p CallbackPolicy) checkHost(ctx context.Context, host string) error {
	literal, err := p.checkLiteral(host)
	if err != nil || literal {
		return err
	}
	lookup := p.LookupHost
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, callbackLookupTimeout)
	defer cancel()
	addrs, err := lookup(ctx, host)
	if err != nil {
		return nil
	}
	for _, ip := range addrs {
		if !p.Permits(ip) {
			return fmt.Errorf("%w: %s resolves to %s", ErrCallbackBlocked, host, ip.Unmap())
		}
	}
	return nil
}

// control is a net.Dialer Control function: it refuses to connect to an
// address the policy blocks, after name resolution.
func (p CallbackPolicy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s is not an IP address", ErrCallbackBlocked, address)
	}
	if !p.Permits(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrCallbackBlocked, ap.Addr().Unmap())
	}
	return nil
}

// Client returns an HTTP client for webhook deliveries under the policy:
// its dialer refuses blocked addresses, it follows no redirects (a 3xx is
// a failed attempt: the receiver must give its final URL), and it bounds
// connecting, the TLS handshake and the wait for response headers. Through
// a proxy (HTTPS_PROXY) the dialer sees the proxy's address only: the
// proxy must then enforce the policy.
func (p CallbackPolicy) Client() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: p.control}).DialContext
	tr.TLSHandshakeTimeout = 5 * time.Second
	tr.ResponseHeaderTimeout = defaultWebhookTimeout
	tr.MaxIdleConnsPerHost = 4
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
