package config

import (
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

func TestInFlightAndQuotaParsed(t *testing.T) {
	tests := []struct {
		name, fields string
		max          int // 0: no lease set
		hold         time.Duration
		quota        *gcra.Quota
		zone         string
	}{
		{"unset", ``, 0, 0, nil, ""},
		{"max_in_flight with the default hold", `,"max_in_flight":3`, 3, DefaultLeaseHold, nil, ""},
		{"max_in_flight and its hold", `,"max_in_flight":1,"lease_hold":"45s"`, 1, 45 * time.Second, nil, ""},
		{"bounds", `,"max_in_flight":20,"lease_hold":"15m"`, 20, 15 * time.Minute, nil, ""},
		{"daily quota in the vendor's zone", `,"quota":{"count":50,"period":"day","time_zone":"Europe/Madrid"}`, 0, 0,
			&gcra.Quota{Count: 50, Period: gcra.Day}, "Europe/Madrid"},
		{"hourly quota in UTC", `,"quota":{"count":1000,"period":"hour"}`, 0, 0, &gcra.Quota{Count: 1000, Period: gcra.Hour}, "UTC"},
		{"both", `,"max_in_flight":3,"quota":{"count":9,"period":"day","time_zone":"America/Los_Angeles"}`, 3, DefaultLeaseHold,
			&gcra.Quota{Count: 9, Period: gcra.Day}, "America/Los_Angeles"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":5,"burst":5}` + tt.fields + `}`)))
			if err != nil {
				t.Fatal(err)
			}
			ep := c.Channels["bk"].Endpoints["rates"]
			f := ep.InFlight("bk#c1#rates", c.PushTimeout())
			switch {
			case tt.max == 0 && f != nil:
				t.Fatalf("InFlight = %+v, want none", f)
			case tt.max != 0 && (f == nil || f.Max != tt.max || f.Hold != tt.hold || f.Key != "bk#c1#rates" || f.Validate() != nil):
				t.Fatalf("InFlight = %+v, want max %d hold %v (valid)", f, tt.max, tt.hold)
			}
			q, err := ep.CalendarQuota("bk#c1#rates")
			switch {
			case err != nil:
				t.Fatal(err)
			case tt.quota == nil && q != nil:
				t.Fatalf("CalendarQuota = %+v, want none", q)
			case tt.quota != nil && (q == nil || q.Quota.Count != tt.quota.Count || q.Quota.Period != tt.quota.Period ||
				q.Quota.Location.String() != tt.zone || q.Validate() != nil):
				t.Fatalf("CalendarQuota = %+v, want %+v in %s", q, tt.quota, tt.zone)
			}
		})
	}
}

func TestInFlightAndQuotaRefusedWithPaths(t *testing.T) {
	const at = "channels.bk.endpoints.rates."
	tests := []struct{ name, fields, want string }{
		{"zero in flight", `"max_in_flight":0`, at + "max_in_flight: 0, want 1 to 20"},
		{"negative in flight", `"max_in_flight":-1`, at + "max_in_flight: -1, want 1 to 20"},
		{"above the lease slots", `"max_in_flight":21`, at + "max_in_flight: 21, want 1 to 20"},
		{"fractional", `"max_in_flight":2.5`, "cannot unmarshal number 2.5"},
		{"hold without max", `"lease_hold":"30s"`, at + "lease_hold: set without max_in_flight"},
		{"hold not a duration", `"max_in_flight":3,"lease_hold":"30"`, at + `lease_hold: "30" is not a duration`},
		{"hold below the push's time", `"max_in_flight":3,"lease_hold":"5s"`, at + "lease_hold: 5s, want 21s (push_timeout 20s + 1s"},
		{"hold of the push's time alone", `"max_in_flight":3,"lease_hold":"20s"`, at + "lease_hold: 20s, want 21s (push_timeout 20s + 1s"},
		{"hold above the most", `"max_in_flight":3,"lease_hold":"16m"`, at + "lease_hold: 16m, want 21s"},
		{"quota count zero", `"quota":{"count":0,"period":"day"}`, at + "quota.count: 0, want ≥ 1"},
		{"quota period", `"quota":{"count":5,"period":"week"}`, at + `quota.period: "week", want "hour" or "day"`},
		{"quota zone", `"quota":{"count":5,"period":"day","time_zone":"Mars/Olympus"}`, at + `quota.time_zone: "Mars/Olympus"`},
		{"quota zone abbreviation", `"quota":{"count":5,"period":"day","time_zone":"PST"}`, at + `quota.time_zone: "PST"`},
		{"quota unknown field", `"quota":{"count":5,"period":"day","zone":"UTC"}`, `unknown field "zone"`},
		{"quota with adaptive", `"quota":{"count":5,"period":"day"},"adaptive":{}`, at + "quota: cannot be combined with adaptive"},
		{"quota with shards", `"quota":{"count":5,"period":"day"},"shards":2`, at + "quota: cannot be combined with shards"},
		{"quota with items", `"quota":{"count":5,"period":"day"},"cost":"items"`, at + `quota: counts requests; it cannot be combined with cost "items"`},
		{"quota with a reserve", `"quota":{"count":5,"period":"day"},"urgent_reserve":1`, at + "quota: cannot be combined with urgent_reserve"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":5,"burst":5},` + tt.fields + `}`)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// Endpoints sharing a meter share its leases and quota: they must agree.
func TestMeterEndpointsAgreeOnInFlightAndQuota(t *testing.T) {
	for _, extra := range []string{`"max_in_flight":3`, `"lease_hold":"30s","max_in_flight":3`, `"quota":{"count":5,"period":"day"}`} {
		a := `{"path":"/ari","meter":"ari","limit":{"rate":5,"burst":5},"max_in_flight":3,"lease_hold":"45s"}`
		b := `{"path":"/ari","meter":"ari","limit":{"rate":5,"burst":5},` + extra + `}`
		cfg := `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":` + a + `,"availability":` + b +
			`},"credentials":{"c1":{"token_env":"T"}}}},"properties":{"h1":[{"channel":"bk","credential":"c1","hotel_ref":"R"}]}}`
		if _, err := Parse([]byte(cfg)); err == nil || !strings.Contains(err.Error(), "shares meter") {
			t.Errorf("%s: Parse = %v, want a meter mismatch", extra, err)
		}
	}
}

// One figure bounds a push: the config's push_timeout is the lease's
// Timeout with LeaseSlack, and the default hold adds 5 s to it.
func TestInFlightFollowsThePushTimeout(t *testing.T) {
	withPush := func(push, ep string) string {
		return strings.Replace(modesConfig(ep), "{", `{"push_timeout":"`+push+`",`, 1)
	}
	const ep = `{"path":"/r","limit":{"rate":5,"burst":5},"max_in_flight":2}`
	tests := []struct {
		name, cfg     string
		push          time.Duration
		timeout, hold time.Duration
	}{
		{"default: otapush.PushTimeout", modesConfig(ep), 20 * time.Second, 21 * time.Second, 25 * time.Second},
		{"push_timeout 2s", withPush("2s", ep), 2 * time.Second, 3 * time.Second, 7 * time.Second},
		{"push_timeout 300ms, lease_hold of the least", withPush("300ms", `{"path":"/r","limit":{"rate":5,"burst":5},"max_in_flight":2,"lease_hold":"1.3s"}`),
			300 * time.Millisecond, 1300 * time.Millisecond, 1300 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.cfg))
			if err != nil {
				t.Fatal(err)
			}
			f := c.Channels["bk"].Endpoints["rates"].InFlight("k", c.PushTimeout())
			if c.PushTimeout() != tt.push || f.Timeout != tt.timeout || f.Hold != tt.hold || f.Validate() != nil {
				t.Fatalf("PushTimeout %v, InFlight %+v; want %v, timeout %v and hold %v (valid)", c.PushTimeout(), f, tt.push, tt.timeout, tt.hold)
			}
		})
	}
	for _, bad := range []struct{ push, ep, want string }{
		{"50ms", ep, `push_timeout: "50ms", want a Go duration from 100ms to 5m0s`},
		{"6m", ep, `push_timeout: "6m", want a Go duration from 100ms`},
		{"soon", ep, `push_timeout: "soon"`},
		{"10s", `{"path":"/r","limit":{"rate":5,"burst":5},"max_in_flight":2,"lease_hold":"10s"}`,
			"channels.bk.endpoints.rates.lease_hold: 10s, want 11s (push_timeout 10s + 1s"},
	} {
		if _, err := Parse([]byte(withPush(bad.push, bad.ep))); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("push_timeout %s: Parse = %v, want an error containing %q", bad.push, err, bad.want)
		}
	}
	if DefaultLeaseHold != otapush.PushTimeout+5*time.Second || otapush.DefaultPolicy.MaxElapsed != otapush.PushTimeout {
		t.Fatalf("DefaultLeaseHold %v, the push budget %v; want otapush.PushTimeout %v + 5s, and it", DefaultLeaseHold, otapush.DefaultPolicy.MaxElapsed, otapush.PushTimeout)
	}
}

// The lease set a learned cap asks of a route naming no max_in_flight is
// built once, at validation, from push_timeout alone: MaxLeases, the
// default lease_hold, and the shortest hold a push of that timeout needs
// (MinLeaseHold); a route has it under its own key, a copy of its own.
func TestLearnIsBuiltAtValidationFromPushTimeout(t *testing.T) {
	tests := []struct {
		name, push string
		want       time.Duration // push_timeout in force
	}{
		{"default push_timeout", ``, otapush.PushTimeout},
		{"push_timeout 20s", `,"push_timeout":"20s"`, 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := strings.TrimSuffix(modesConfig(`{"path":"/r","limit":{"rate":5,"burst":5}}`), "}") + tt.push + "}"
			c, err := Parse([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if c.learn.Max == 0 {
				t.Fatalf("Validate left no lease set to learn under (%+v)", c.learn)
			}
			unvalidated := &Config{PushTimeoutSetting: c.PushTimeoutSetting}
			for _, got := range []*limiter.InFlight{c.Learn("bk#c1#rates"), unvalidated.Learn("bk#c1#rates")} {
				want := limiter.InFlight{Key: "bk#c1#rates", Max: limiter.MaxLeases, Hold: tt.want + leaseStart, Timeout: MinLeaseHold(tt.want)}
				if *got != want || got.Validate() != nil {
					t.Fatalf("Learn = %+v, want %+v (valid)", *got, want)
				}
			}
			a := c.Learn("bk#c1#rates")
			a.Max = 1
			if b := c.Learn("bk#c2#rates"); b.Max != limiter.MaxLeases || b.Key != "bk#c2#rates" {
				t.Fatalf("Learn under another key = %+v: a route's copy changed the set", *b)
			}
		})
	}
}
