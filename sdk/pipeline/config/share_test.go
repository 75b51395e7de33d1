package config

import (
	"strings"
	"testing"
	"time"
)

func TestShareParsesWithDefaults(t *testing.T) {
	c, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":10,"burst":20}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := c.Limits("bk", "rates"); l.Share != nil || l.Buckets("k", "")[0].Share != nil {
		t.Fatalf("no share set: limits carry %+v", l.Share)
	}
	c, err = Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":10,"burst":20},"share":{"fraction":0.5}}`)))
	if err != nil {
		t.Fatal(err)
	}
	l, _ := c.Limits("bk", "rates")
	s := l.Buckets("k", "")[0].Share
	if s == nil || s.Fraction != 0.5 || s.Leases != DefaultShareLeases || s.Burst != 1 || s.Epoch != DefaultShareEpoch || s.Quiet != DefaultShareQuiet {
		t.Fatalf("share with defaults: %+v; want 8 leases banking 1 token each (2 each would leave the shared part less than half the burst)", s)
	}
	c, err = Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":10,"burst":40},"share":{"fraction":0.5}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if l, _ = c.Limits("bk", "rates"); l.Share.Leases != DefaultShareLeases || l.Share.Burst != DefaultShareBurst {
		t.Fatalf("share on burst 40: %+v; want 8 leases banking 2 tokens each", l.Share)
	}
	c, err = Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":10,"burst":4},"share":{"fraction":0.25,"epoch":"30s","quiet":"5m"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	l, _ = c.Limits("bk", "rates")
	if s := l.Share; s.Leases != 3 || s.Burst != 1 || s.Epoch != 30*time.Second || s.Quiet != 5*time.Minute {
		t.Fatalf("share on burst 4: %+v; want 3 leases (burst − 1) banking 1 token each, 30s, 5m", s)
	}
	c, err = Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":10,"burst":20},"share":{"fraction":0.5,"leases":4,"burst":4}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if l, _ = c.Limits("bk", "rates"); l.Share.Leases != 4 || l.Share.Burst != 4 {
		t.Fatalf("share with leases 4, burst 4: %+v", l.Share)
	}
}

func TestShareRefused(t *testing.T) {
	for _, tc := range []struct{ endpoint, want string }{
		{`"share":{"fraction":0}`, "share.fraction"},
		{`"share":{"fraction":0.5,"leases":20}`, "below the burst"},
		{`"share":{"fraction":0.5,"leases":5,"burst":4}`, "below the burst"},
		{`"share":{"fraction":0.5,"burst":-1}`, "share.burst"},
		{`"share":{"fraction":0.5,"epoch":"soon"}`, `epoch "soon"`},
		{`"share":{"fraction":0.5,"epoch":"10ms"}`, "share.epoch"},
		{`"share":{"fraction":0.5},"shards":2`, "not with limits, shards or property_share"},
		{`"share":{"fraction":0.5},"adaptive":{}`, "not with adaptive"},
		{`"share":{"fraction":0.5},"urgent_reserve":2`, "not with urgent_reserve"},
	} {
		_, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":10,"burst":20},` + tc.endpoint + `}`)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %q", tc.endpoint, err, tc.want)
		}
	}
}
