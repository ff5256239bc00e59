package turn_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/turnd/turnd/tool"
	"github.com/turnd/turnd/turn"
)

// fakeLookup resolves every name to the addresses given for it, and fails
// for others.
func fakeLookup(names map[string][]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range names[host] {
			out = append(out, netip.MustParseAddr(a))
		}
		if len(out) == 0 {
			return nil, errors.New("no such host")
		}
		return out, nil
	}
}

func TestCallbackPolicyAtSessionCreation(t *testing.T) {
	t.Parallel()
	lookup := fakeLookup(map[string][]string{
		"hooks.example.com": {"203.0.113.7"},
		"rebind.example":    {"203.0.113.8", "169.254.169.254"},
		"internal.example":  {"10.1.2.3"},
	})
	loopbackAndPrivate := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		name    string
		policy  turn.CallbackPolicy
		url     string
		blocked bool
	}{
		{"metadata IPv4", turn.CallbackPolicy{}, "http://169.254.169.254/latest/meta-data/", true},
		{"metadata IPv4, mapped in IPv6", turn.CallbackPolicy{}, "http://[::ffff:169.254.169.254]/", true},
		{"metadata IPv6 (AWS)", turn.CallbackPolicy{}, "http://[fd00:ec2::254]/", true},
		{"metadata name (GCP)", turn.CallbackPolicy{}, "http://metadata.google.internal/computeMetadata/v1/", true},
		{"metadata name with a dot", turn.CallbackPolicy{}, "http://Metadata.Google.Internal./", true},
		{"link-local IPv4", turn.CallbackPolicy{}, "https://169.254.10.1:8443/hook", true},
		{"link-local IPv6", turn.CallbackPolicy{}, "http://[fe80::1]/", true},
		{"link-local IPv6 with a zone", turn.CallbackPolicy{}, "http://[fe80::1%25eth0]:8080/", true},
		{"metadata through NAT64", turn.CallbackPolicy{}, "http://[64:ff9b::a9fe:a9fe]/", true},
		{"a public address through NAT64", turn.CallbackPolicy{}, "http://[64:ff9b::cb00:7107]/", false},
		{"unspecified IPv4", turn.CallbackPolicy{}, "http://0.0.0.0:8080/", true},
		{"unspecified IPv6", turn.CallbackPolicy{}, "http://[::]:8080/", true},
		{"a name resolving to metadata", turn.CallbackPolicy{}, "https://rebind.example/hook", true},
		{"a public name", turn.CallbackPolicy{}, "https://hooks.example.com/turnd", false},
		{"a name that does not resolve now", turn.CallbackPolicy{}, "https://later.example/turnd", false},
		{"loopback by default", turn.CallbackPolicy{}, "http://127.0.0.1:8080/hook", false},
		{"private by default", turn.CallbackPolicy{}, "https://internal.example/hook", false},
		{"loopback denied", turn.CallbackPolicy{Deny: loopbackAndPrivate}, "http://127.0.0.1:8080/hook", true},
		{"private denied, by name", turn.CallbackPolicy{Deny: loopbackAndPrivate}, "https://internal.example/hook", true},
		{"link-local allowed", turn.CallbackPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("169.254.10.0/24")}}, "https://169.254.10.1:8443/hook", false},
		{"allowed outside the allowed net", turn.CallbackPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("169.254.10.0/24")}}, "http://169.254.169.254/", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := tc.policy
			p.LookupHost = lookup
			svc := newService(t, turn.Config{Store: openSQLite(t), Tools: func() *tool.Registry { return mustRegistry(t) }, CallbackPolicy: p})
			_, err := svc.CreateSession(context.Background(), turn.SessionSpec{ID: "s", CallbackURL: tc.url})
			var inv *turn.InvalidError
			switch {
			case tc.blocked && (!errors.As(err, &inv) || inv.Field != "callback_url" || !strings.Contains(inv.Reason, "blocked")):
				t.Fatalf("%s: %v, want callback_url refused as blocked", tc.url, err)
			case !tc.blocked && err != nil:
				t.Fatalf("%s: %v", tc.url, err)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestCallbackPolicyAtDelivery: a callback host that resolved to an allowed
// address when its session was created, and to a blocked one when its
// webhook is delivered, is refused by the delivery's dialer; the webhook is
// given up without reaching the receiver.
func TestCallbackPolicyAtDelivery(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	u, err := url.Parse(rc.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	policy := turn.CallbackPolicy{
		Deny:       []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		LookupHost: fakeLookup(map[string][]string{"localhost": {"203.0.113.9"}}),
	}
	base := policy.Client()
	tried := make(chan error, 8)
	client := &http.Client{CheckRedirect: base.CheckRedirect, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := base.Transport.RoundTrip(r)
		tried <- err
		return resp, err
	})}
	h := newHooked(t, newFixture(t), newSigner(t), func(c *turn.Config) {
		c.CallbackPolicy = policy
		c.WebhookClient = client
	})
	h.createSession(t, "s", "http://localhost:"+u.Port()+"/hook")
	h.f.run(h.svc, "s", turn.TurnRequest{ID: "t", Calls: calls("a=read")})
	if err := <-tried; !errors.Is(err, turn.ErrCallbackBlocked) {
		t.Fatalf("delivery: %v, want ErrCallbackBlocked", err)
	}
	h.shutdown(t)
	ws := h.webhooks(t, "s", "t")
	if len(ws) != 1 || ws[0].DeadAt.IsZero() || !ws[0].DeliveredAt.IsZero() {
		t.Fatalf("recorded %+v, want one given up", ws)
	}
	if len(rc.got) != 0 {
		t.Fatalf("the receiver got %d requests", len(rc.got))
	}
	// The default policy's client (Config.WebhookClient's default) reaches
	// the same receiver.
	resp, err := turn.CallbackPolicy{}.Client().Post(rc.srv.URL, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	<-rc.got
}
