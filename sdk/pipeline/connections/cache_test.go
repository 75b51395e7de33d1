package connections

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

// source is an in-memory Source that counts its reads.
type source struct {
	conns map[string][]Connection
	reads int
	err   error
}

func (s *source) Get(_ context.Context, pid string) ([]Connection, error) {
	s.reads++
	return s.conns[pid], s.err
}

func (s *source) CountUnmapped(context.Context, string, string, string, string) error { return nil }

func testConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(`{"channels": {
  "bk": {"base_url": "https://bk.example", "endpoints": {"availability": {"path": "/a", "limit": {"rate": 5, "burst": 5}}, "rates": {"path": "/r", "limit": {"rate": 5, "burst": 5}}},
         "credentials": {"main": {"token_env": "BK"}}},
  "ex": {"base_url": "https://ex.example", "endpoints": {"availability": {"path": "/a", "limit": {"rate": 5, "burst": 5}}},
         "credentials": {"main": {"token_env": "EX"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The cache answers from what it read less than MaxAge ago, unknown
// properties included, and reads again at MaxAge.
func TestCacheAgeIsBounded(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	src := &source{conns: map[string][]Connection{}}
	c := &Cache{Source: src, Config: testConfig(t), Now: func() time.Time { return now }}
	steps := []struct {
		at        time.Duration
		connect   bool
		wantKnown bool
		wantReads int
	}{
		{0, false, false, 1},
		{time.Second, true, false, 1}, // connected, but the cache read before
		{DefaultMaxAge - time.Nanosecond, false, false, 1},
		{DefaultMaxAge, false, true, 2}, // the bound: read again
		{DefaultMaxAge + 30*time.Second, false, true, 2},
	}
	for i, st := range steps {
		now = t0.Add(st.at)
		if st.connect {
			src.conns["h"] = []Connection{{PropertyID: "h", Property: config.Property{Channel: "bk", Credential: "main", HotelRef: "B"}}}
		}
		ts, known, err := c.Targets(ctx, "h", "availability")
		if err != nil || known != st.wantKnown || src.reads != st.wantReads || c.Reads() != int64(st.wantReads) {
			t.Fatalf("step %d at %v: known %v (%d targets), %d reads, %v; want known %v after %d reads", i, st.at, known, len(ts), src.reads, err, st.wantKnown, st.wantReads)
		}
	}
}

// Targets keep what the connection receives: disabled connections and
// kinds it does not take go nowhere; each carries its mapping.
func TestCacheTargets(t *testing.T) {
	ctx := context.Background()
	src := &source{conns: map[string][]Connection{"h": {
		{PropertyID: "h", Property: config.Property{Channel: "bk", Credential: "main", HotelRef: "B", Kinds: []string{"rates"}, RoomTypes: map[string]string{"DBL": "1"}}},
		{PropertyID: "h", Property: config.Property{Channel: "ex", Credential: "main", HotelRef: "E", Disabled: true}},
	}}}
	c := &Cache{Source: src, Config: testConfig(t)}
	for _, tc := range []struct {
		kind string
		want []string
	}{
		{"availability", nil},
		{"rates", []string{"bk"}},
		{"restrictions", nil},
	} {
		ts, known, err := c.Targets(ctx, "h", tc.kind)
		if err != nil || !known || len(ts) != len(tc.want) {
			t.Fatalf("%s: %+v known %v %v, want channels %v", tc.kind, ts, known, err, tc.want)
		}
		for i, tg := range ts {
			if tg.Channel != tc.want[i] || tg.Codes.RoomTypes["DBL"] != "1" {
				t.Fatalf("%s: target %+v, want %s with its mapping", tc.kind, tg, tc.want[i])
			}
		}
	}
}

// A read that fails is returned and not cached: the next call reads again.
func TestCacheDoesNotKeepAFailedRead(t *testing.T) {
	src := &source{err: errors.New("throttled")}
	c := &Cache{Source: src, Config: testConfig(t)}
	if _, _, err := c.Targets(context.Background(), "h", "rates"); err == nil {
		t.Fatal("a failed read answered without an error")
	}
	src.err = nil
	src.conns = map[string][]Connection{"h": {{PropertyID: "h", Property: config.Property{Channel: "bk", Credential: "main", HotelRef: "B"}}}}
	if _, known, err := c.Targets(context.Background(), "h", "rates"); err != nil || !known || src.reads != 2 {
		t.Fatalf("after a failed read: known %v, %v, %d reads; want the property read again", known, err, src.reads)
	}
}
