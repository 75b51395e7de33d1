package otapush

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

func TestSignalsRead(t *testing.T) {
	ietf := Signals{Headers: []HeaderSpec{{Preset: PresetIETF}}}
	x60 := Signals{Headers: []HeaderSpec{{Preset: PresetXRateLimit, Window: time.Minute}}}
	xNoWindow := Signals{Headers: []HeaderSpec{{Preset: PresetXRateLimit}}}
	eg := Signals{Headers: []HeaderSpec{{Preset: PresetEG}}}
	rapid := Signals{Headers: []HeaderSpec{{Preset: PresetExpediaRapid}}}
	custom := Signals{Headers: []HeaderSpec{{Remaining: "X-Quota-Left", Unit: UnitPercent, Limit: "X-Quota", Window: 10 * time.Second}}}
	both := Signals{Headers: []HeaderSpec{{Preset: PresetIETF}, {Preset: PresetXRateLimit}}}
	tests := []struct {
		name    string
		sig     Signals
		headers [][2]string
		want    Reading
	}{
		{"IETF remaining and policy", ietf, [][2]string{{"RateLimit", `"default";r=40;t=30`}, {"RateLimit-Policy", `"default";q=100;w=60`}},
			Reading{Remaining: 40, HasRemaining: true, Rate: 100.0 / 60}},
		{"IETF: the fewest left over several policies", ietf, [][2]string{{"RateLimit", `"burst";r=3;t=1, "day";r=900;t=4000`}},
			Reading{Remaining: 3, HasRemaining: true}},
		{"IETF: the shortest window is the bucket's policy", ietf, [][2]string{{"RateLimit-Policy", `"day";q=5000;w=86400, "sec";q=10;w=1`}},
			Reading{Rate: 10}},
		{"IETF: a token name, fields split over two lines", ietf, [][2]string{{"RateLimit", `permin;r=0;t=12`}, {"RateLimit-Policy", `permin;q=30;w=60`}},
			Reading{Remaining: 0, HasRemaining: true, Rate: 0.5}},
		{"IETF: a quoted name holding a comma and a semicolon", ietf, [][2]string{{"RateLimit-Policy", `"a,b;c";q=20;w=10`}},
			Reading{Rate: 2}},
		{"IETF: a policy without its window is ignored", ietf, [][2]string{{"RateLimit-Policy", `"default";q=100`}},
			Reading{}},
		{"IETF: garbage is ignored", ietf, [][2]string{{"RateLimit", `;;;r=x`}, {"RateLimit-Policy", `q=-1;w=0`}},
			Reading{}},
		{"IETF: a quota of 0 drains", ietf, [][2]string{{"RateLimit-Policy", `"default";q=0;w=60`}},
			Reading{Remaining: 0, HasRemaining: true}},
		{"X-RateLimit with its window", x60, [][2]string{{"X-RateLimit-Remaining", "7"}, {"X-RateLimit-Limit", "300"}},
			Reading{Remaining: 7, HasRemaining: true, Rate: 5}},
		{"X-RateLimit-Limit without a window means nothing", xNoWindow, [][2]string{{"X-RateLimit-Limit", "300"}},
			Reading{}},
		{"an older spelling", xNoWindow, [][2]string{{"X-Rate-Limit-Remaining", "2"}},
			Reading{Remaining: 2, HasRemaining: true}},
		{"Expedia XAP", eg, [][2]string{{"EG-Rate-Limit-Remaining-Minute", "12"}, {"EG-Rate-Limit-Minute", "120"}},
			Reading{Remaining: 12, HasRemaining: true, Rate: 2}},
		{"Expedia Rapid: a percentage", rapid, [][2]string{{"Rate-Limit-Minute-Remaining", "4.5"}},
			Reading{Percent: 4.5, HasPercent: true}},
		{"a vendor's own names, percent", custom, [][2]string{{"X-Quota-Left", "80"}, {"X-Quota", "50"}},
			Reading{Percent: 80, HasPercent: true, Rate: 5}},
		{"the tightest of two families", both, [][2]string{{"RateLimit", `"d";r=9;t=1`}, {"X-RateLimit-Remaining", "4"}},
			Reading{Remaining: 4, HasRemaining: true}},
		{"nothing sent", both, nil, Reading{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, kv := range tt.headers {
				h.Add(kv[0], kv[1])
			}
			got := tt.sig.Read(h)
			if got.Remaining != tt.want.Remaining || got.HasRemaining != tt.want.HasRemaining ||
				got.Percent != tt.want.Percent || got.HasPercent != tt.want.HasPercent ||
				(got.Rate-tt.want.Rate) > 1e-9 || (tt.want.Rate-got.Rate) > 1e-9 {
				t.Errorf("Read = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestSignalsLowAndThrottles(t *testing.T) {
	s := Signals{Statuses: []int{429, 403}, LowRemaining: 2, LowPercent: 5}
	tests := []struct {
		name string
		r    Reading
		low  bool
	}{
		{"nothing read", Reading{}, false},
		{"1 left, below 2", Reading{Remaining: 1, HasRemaining: true}, true},
		{"2 left", Reading{Remaining: 2, HasRemaining: true}, false},
		{"4.9% left", Reading{Percent: 4.9, HasPercent: true}, true},
		{"5% left", Reading{Percent: 5, HasPercent: true}, false},
	}
	for _, tt := range tests {
		if got := s.Low(tt.r); got != tt.low {
			t.Errorf("%s: Low = %v, want %v", tt.name, got, tt.low)
		}
	}
	for status, want := range map[int]bool{429: true, 403: true, 401: false, 500: false, 200: false} {
		if got := s.Throttles(status); got != want {
			t.Errorf("Throttles(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestSignalsValidate(t *testing.T) {
	tests := []struct {
		name string
		s    Signals
		want string // "" for valid
	}{
		{"the defaults", DefaultSignals, ""},
		{"Hotelbeds: 403 too", Signals{Statuses: []int{429, 403}}, ""},
		{"no status", Signals{}, "statuses"},
		{"401 is a credential, not a throttle", Signals{Statuses: []int{401}}, "statuses"},
		{"200 is no throttle", Signals{Statuses: []int{200}}, "statuses"},
		{"negative low_remaining", Signals{Statuses: []int{429}, LowRemaining: -1}, "low_remaining"},
		{"low_percent of 100", Signals{Statuses: []int{429}, LowPercent: 100}, "low_percent"},
		{"unknown preset", Signals{Statuses: []int{429}, Headers: []HeaderSpec{{Preset: "ietf-2019"}}}, "headers[0]: preset"},
		{"preset with names", Signals{Statuses: []int{429}, Headers: []HeaderSpec{{Preset: PresetIETF, Remaining: "X"}}}, "takes no other field"},
		{"a limit without its window", Signals{Statuses: []int{429}, Headers: []HeaderSpec{{Limit: "X-Quota"}}}, "window_seconds"},
		{"a bad unit", Signals{Statuses: []int{429}, Headers: []HeaderSpec{{Remaining: "X-Left", Unit: "ratio"}}}, "unit"},
		{"a bad header name", Signals{Statuses: []int{429}, Headers: []HeaderSpec{{Remaining: "X Left"}}}, "not a header name"},
		{"an empty spec", Signals{Statuses: []int{429}, Headers: []HeaderSpec{{}}}, "neither a preset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.s.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// adaptLog is a limiter that adapts: it records what the client tells it.
type adaptLog struct {
	bucketLog
	mu        sync.Mutex
	throttles []*limiter.Stamp
	published []float64
}

func (a *adaptLog) Throttle(_ context.Context, _ limiter.Bucket, granted *limiter.Stamp, _ time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.throttles = append(a.throttles, granted)
	return nil
}

func (a *adaptLog) Publish(_ context.Context, _ limiter.Bucket, rate float64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.published = append(a.published, rate)
	return nil
}

// A vendor that throttles with 403 (Hotelbeds) reaches the limiter as a
// throttle of the reservation the request was sent on, is retried after
// its Retry-After, and a published limit is passed on.
func TestPushTellsAnAdaptiveLimiterWhatTheVendorSaid(t *testing.T) {
	srv, calls := vendor(t,
		scripted{status: 403, header: map[string]string{"Retry-After": "1"}},
		scripted{status: 200, header: map[string]string{"RateLimit-Policy": `"default";q=30;w=60`}, body: `{"ok":true}`})
	lim := &adaptLog{}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	c, err := New(srv.Client(), lim, DefaultPolicy, WithClock(func() time.Time { return now }),
		WithJitter(func(time.Duration) time.Duration { return 0 }),
		WithSignals(func(key string) (Signals, bool) {
			return Signals{Statuses: []int{429, 403}, Headers: []HeaderSpec{{Preset: PresetIETF}}, LowRemaining: 1}, key == "hotelbeds#c#rates"
		}))
	if err != nil {
		t.Fatal(err)
	}
	c.sleep = func(context.Context, time.Duration) error { return nil }
	resp, err := c.Push(context.Background(), Request{Bucket: limiter.Bucket{Key: "hotelbeds#c#rates", Limit: limiter.PerSecond(2, 2)},
		URL: srv.URL, JobID: "job-1", Body: []byte(`{}`), Header: http.Header{"Authorization": {"Bearer secret"}}})
	if err != nil || resp.Throttled != 1 || *calls != 2 {
		t.Fatalf("Push = %+v, %v after %d calls; want success after one throttled answer", resp, err, *calls)
	}
	if len(lim.throttles) != 1 || lim.throttles[0] == nil {
		t.Fatalf("throttles %+v, want one, with the stamp of the reservation the request was sent on", lim.throttles)
	}
	if len(lim.penalties) != 0 {
		t.Errorf("penalties %v: an adaptive limiter is throttled, not penalized", lim.penalties)
	}
	if len(lim.published) != 1 || lim.published[0] != 0.5 {
		t.Errorf("published %v, want [0.5] (30 per 60 s)", lim.published)
	}
}
