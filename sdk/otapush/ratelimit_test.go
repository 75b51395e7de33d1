package otapush

import (
	"bytes"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"
)

type fields [][2]string

func header(f fields) http.Header {
	h := http.Header{}
	for _, kv := range f {
		h.Add(kv[0], kv[1])
	}
	return h
}

// Every example of draft-ietf-httpapi-ratelimit-headers-11, read with the
// IETF preset. want lists what the example says, in our terms.
func TestReadDraft11Examples(t *testing.T) {
	ietf := Signals{Headers: []HeaderSpec{{Preset: PresetIETF}}}
	type want struct {
		remaining    int
		hasRemaining bool
		rate         float64
		concurrency  int
		bytesRate    float64
		reset        time.Duration
		hasReset     bool
		pk           string
	}
	tests := []struct {
		name string
		h    fields
		want want
	}{
		{"§3 two policies on one line", fields{{"RateLimit-Policy", `"burst";q=100;w=60,"daily";q=1000;w=86400`}},
			want{rate: 100.0 / 60}},
		{"§3.2 a policy with its window", fields{{"RateLimit-Policy", `"default";q=100;w=10`}},
			want{rate: 10}},
		{"§3.2 multiple policies", fields{{"RateLimit-Policy", `"permin";q=50;w=60,"perhr";q=1000;w=3600`}},
			want{rate: 50.0 / 60}},
		{"§3.2 a partition key", fields{{"RateLimit-Policy", `"peruser";q=100;w=60;pk=:cHsdsRa894==:`}},
			want{rate: 100.0 / 60, pk: "\x70\x7b\x1d\xb1\x16\xbc\xf7"}},
		{"§3.2 a partition key and a bytes unit: no request rate", fields{{"RateLimit-Policy", `"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`}},
			want{bytesRate: 6553.5, pk: "\xb1\xd7\xe3\x2c\x95\x0e\x50"}},
		{"§4 and §4.2 remaining and window", fields{{"RateLimit", `"default";r=50;t=30`}},
			want{remaining: 50, hasRemaining: true, reset: 30 * time.Second, hasReset: true}},
		{"§4.2 a partition key, no window", fields{{"RateLimit", `"default";r=999;pk=:dHJpYWwxMjEzMjM=:`}},
			want{remaining: 999, hasRemaining: true, pk: "trial121323"}},
		{"§4.2 300 MB for an application", fields{{"RateLimit", `"default";r=300000000;t=60;pk=:QXBwLTk5OQ==:`}},
			want{remaining: 300000000, hasRemaining: true, reset: time.Minute, hasReset: true, pk: "App-999"}},
		{"§6 a redirect with nothing left", fields{{"RateLimit", `"problemPolicy";r=0;t=10`}},
			want{remaining: 0, hasRemaining: true, reset: 10 * time.Second, hasReset: true}},
		{"§7 one left", fields{{"RateLimit", `"default";r=1;t=7`}},
			want{remaining: 1, hasRemaining: true, reset: 7 * time.Second, hasReset: true}},
		{"§8.5 a daily reset", fields{{"RateLimit", `"daily";r=1;t=86400`}},
			want{remaining: 1, hasRemaining: true, reset: 24 * time.Hour, hasReset: true}},
		{"§8.5 a large window's policy with a short effective window", fields{{"RateLimit-Policy", `"somepolicy";q=10000;w=1000`}, {"RateLimit", `"somepolicy";r=10000;t=10`}},
			want{remaining: 10000, hasRemaining: true, rate: 10, reset: 10 * time.Second, hasReset: true}},
		{"B.1.1 quota spent for 50 s", fields{{"RateLimit", `"default";r=0;t=50`}},
			want{remaining: 0, hasRemaining: true, reset: 50 * time.Second, hasReset: true}},
		{"B.1.2 the daily policy is closest", fields{{"RateLimit", `"dayLimit";r=100;t=36000`}},
			want{remaining: 100, hasRemaining: true, reset: 10 * time.Hour, hasReset: true}},
		{"B.1.3 limiting concurrency by lowering r", fields{{"RateLimit-Policy", `"basic";q=100;w=60`}, {"RateLimit", `"basic";r=20;t=56`}},
			want{remaining: 20, hasRemaining: true, rate: 100.0 / 60, reset: 56 * time.Second, hasReset: true}},
		{"B.1.4 a throttled answer", fields{{"Retry-After", "Mon, 05 Aug 2019 09:27:05 GMT"}, {"RateLimit", `"default";r=0;t=5`}},
			want{remaining: 0, hasRemaining: true, reset: 5 * time.Second, hasReset: true}},
		{"B.2.1 the window by parameter", fields{{"RateLimit", `"fixedwindow";r=99;t=50`}, {"RateLimit-Policy", `"fixedwindow";q=100;w=60`}},
			want{remaining: 99, hasRemaining: true, rate: 100.0 / 60, reset: 50 * time.Second, hasReset: true}},
		{"B.2.2 dynamic limits", fields{{"RateLimit-Policy", `"dynamic";q=100;w=60`}, {"RateLimit", `"dynamic";r=9;t=50`}},
			want{remaining: 9, hasRemaining: true, rate: 100.0 / 60, reset: 50 * time.Second, hasReset: true}},
		{"B.2.3 pushing back with a lower policy", fields{{"RateLimit-Policy", `"dynamic";q=15;w=20`}, {"RateLimit", `"dynamic";r=0;t=20`}},
			want{remaining: 0, hasRemaining: true, rate: 0.75, reset: 20 * time.Second, hasReset: true}},
		{"B.3 Retry-After and slow down", fields{{"Retry-After", "20"}, {"RateLimit-Policy", `"dynamic";q=100;w=60`}, {"RateLimit", `"dynamic";r=15;t=40`}},
			want{remaining: 15, hasRemaining: true, rate: 100.0 / 60, reset: 40 * time.Second, hasReset: true}},
		{"B.3.1 multiple windows", fields{{"RateLimit-Policy", `"hour";q=1000;w=3600, "day";q=5000;w=86400`}, {"RateLimit", `"day";r=100;t=36000`}},
			want{remaining: 100, hasRemaining: true, rate: 1000.0 / 3600, reset: 10 * time.Hour, hasReset: true}},
		{"FAQ 8 the simplest form", fields{{"RateLimit", `"default";r=50;t=60`}},
			want{remaining: 50, hasRemaining: true, reset: time.Minute, hasReset: true}},
		{"FAQ 8 policies over two lines with comment parameters", fields{{"RateLimit-Policy", `"sliding";q=100;w=60;burst=1000`}, {"RateLimit-Policy", `"fixed";q=5000;w=3600;burst=0`}, {"RateLimit", `"sliding";r=50;t=44`}},
			want{remaining: 50, hasRemaining: true, rate: 100.0 / 60, reset: 44 * time.Second, hasReset: true}},
		{"appendix: a sliding window", fields{{"RateLimit-Policy", `"sliding";q=12;w=1`}, {"RateLimit", `"sliding";q=12;r=6;t=1`}},
			want{remaining: 6, hasRemaining: true, rate: 12, reset: time.Second, hasReset: true}},
		{"§3.1.2 concurrent requests: max_in_flight, no rate", fields{{"RateLimit-Policy", `"conc";q=3;qu="concurrent-requests", "rate";q=40;w=60`}, {"RateLimit", `"conc";r=0, "rate";r=12;t=30`}},
			want{remaining: 12, hasRemaining: true, rate: 40.0 / 60, concurrency: 3, reset: 30 * time.Second, hasReset: true}},
		{"the lowest of two concurrency policies", fields{{"RateLimit-Policy", `"a";q=5;qu="concurrent-requests";w=1, "b";q=2;qu="concurrent-requests"`}},
			want{concurrency: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ietf.Read(header(tt.h))
			w := tt.want
			if got.Remaining != w.remaining || got.HasRemaining != w.hasRemaining || math.Abs(got.Rate-w.rate) > 1e-9 ||
				got.Concurrency != w.concurrency || math.Abs(got.BytesRate-w.bytesRate) > 1e-9 ||
				got.Reset != w.reset || got.HasReset != w.hasReset || string(got.PartitionKey) != w.pk {
				t.Errorf("Read = %+v\nwant %+v", got, w)
			}
			if len(got.Ignored) != 0 {
				t.Errorf("a draft example reported malformed: %q", got.Ignored)
			}
		})
	}
}

// Malformed members are left out, with a line saying so; the well-formed
// members beside them still count.
func TestMalformedRateLimitFieldsAreIgnored(t *testing.T) {
	ietf := Signals{Headers: []HeaderSpec{{Preset: PresetIETF}}}
	tests := []struct {
		name      string
		h         fields
		remaining int // -1: none
		rate      float64
		ignored   int
	}{
		{"q not a number", fields{{"RateLimit-Policy", `"p";q=abc;w=60`}}, -1, 0, 1},
		{"negative q", fields{{"RateLimit-Policy", `"p";q=-5;w=60`}}, -1, 0, 1},
		{"no q", fields{{"RateLimit-Policy", `"p";w=60`}}, -1, 0, 1},
		{"w of 0", fields{{"RateLimit-Policy", `"p";q=10;w=0`}}, -1, 0, 1},
		{"a decimal w", fields{{"RateLimit-Policy", `"p";q=10;w=1.5`}}, -1, 0, 1},
		{"an unknown unit", fields{{"RateLimit-Policy", `"p";q=10;w=1;qu="furlongs"`}}, -1, 0, 1},
		{"a unit that is no string", fields{{"RateLimit-Policy", `"p";q=10;w=1;qu=:YQ==:`}}, -1, 0, 1},
		{"pk not base64", fields{{"RateLimit-Policy", `"p";q=10;w=1;pk=:not base64!:`}}, -1, 0, 1},
		{"pk not a byte sequence", fields{{"RateLimit", `"p";r=1;pk=abc`}}, -1, 0, 1},
		{"an unterminated name", fields{{"RateLimit", `"default;r=5;t=1`}}, -1, 0, 1},
		{"no name", fields{{"RateLimit", `;r=5;t=1`}}, -1, 0, 1},
		{"an upper-case key", fields{{"RateLimit", `"d";R=5`}}, -1, 0, 1},
		{"r missing", fields{{"RateLimit", `"d";t=5`}}, -1, 0, 1},
		{"r too long for an integer", fields{{"RateLimit", `"d";r=1234567890123456`}}, -1, 0, 1},
		{"t negative", fields{{"RateLimit", `"d";r=3;t=-1`}}, -1, 0, 1},
		{"one bad member beside a good one", fields{{"RateLimit", `"bad";r=x, "good";r=7;t=3`}, {"RateLimit-Policy", `"good";q=20;w=10, "bad";q=`}}, 7, 2, 2},
		{"garbage", fields{{"RateLimit", `;;;r=x`}, {"RateLimit-Policy", `q=-1;w=0`}}, -1, 0, 2},
		{"empty fields", fields{{"RateLimit", ``}, {"RateLimit-Policy", ` , ,`}}, -1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ietf.Read(header(tt.h))
			if tt.remaining < 0 && got.HasRemaining || tt.remaining >= 0 && (!got.HasRemaining || got.Remaining != tt.remaining) {
				t.Errorf("remaining %d (%v), want %d", got.Remaining, got.HasRemaining, tt.remaining)
			}
			if math.Abs(got.Rate-tt.rate) > 1e-9 || got.Concurrency != 0 || got.PartitionKey != nil && tt.ignored > 0 && tt.remaining < 0 {
				t.Errorf("Read = %+v, want rate %v and nothing else", got, tt.rate)
			}
			if len(got.Ignored) != tt.ignored {
				t.Errorf("ignored %q, want %d line(s)", got.Ignored, tt.ignored)
			}
		})
	}
}

// Retry-After takes precedence over t (draft-11 §7); t counts only when
// nothing is left.
func TestPauseTakesRetryAfterOverTheEffectiveWindow(t *testing.T) {
	ietf := Signals{Headers: []HeaderSpec{{Preset: PresetIETF}}}
	now := time.Date(2019, 8, 5, 9, 27, 0, 0, time.UTC)
	tests := []struct {
		name string
		h    fields
		want time.Duration
		ok   bool
	}{
		{"B.3: Retry-After 20 over t=40", fields{{"Retry-After", "20"}, {"RateLimit", `"dynamic";r=15;t=40`}}, 20 * time.Second, true},
		{"B.1.4: an HTTP-date", fields{{"Retry-After", "Mon, 05 Aug 2019 09:27:05 GMT"}, {"RateLimit", `"default";r=0;t=50`}}, 5 * time.Second, true},
		{"no Retry-After, nothing left: t", fields{{"RateLimit", `"default";r=0;t=50`}}, 50 * time.Second, true},
		{"no Retry-After, some left: no pause", fields{{"RateLimit", `"default";r=3;t=50`}}, 0, false},
		{"an unusable Retry-After falls back to t", fields{{"Retry-After", "soon"}, {"RateLimit", `"default";r=0;t=9`}}, 9 * time.Second, true},
		{"nothing", nil, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := header(tt.h)
			got, ok := Pause(h, ietf.Read(h), now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Pause = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// A 503 of type temporary reduced capacity, with a lower policy, reads as
// reduced capacity at the lower rate; other 503s and other types do not.
func TestReducedCapacityProblem(t *testing.T) {
	ietf := Signals{Headers: []HeaderSpec{{Preset: PresetIETF}}}
	body := []byte(`{"type": "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity",
  "title": "Request cannot be satisfied due to temporary server capacity constraints", "violated-policies": ["hourly"]}`)
	problem := fields{{"Content-Type", "application/problem+json"}, {"RateLimit-Policy", `"hourly";q=360;w=3600`}}
	tests := []struct {
		name    string
		status  int
		h       fields
		body    []byte
		reduced bool
		rate    float64
	}{
		{"§5.2 with a lower policy", 503, problem, body, true, 0.1},
		{"a charset parameter", 503, fields{{"Content-Type", "application/problem+json; charset=utf-8"}}, body, true, 0},
		{"not a 503", 429, problem, body, false, 0.1},
		{"another problem type", 503, problem, bytes.Replace(body, []byte("temporary-reduced-capacity"), []byte("quota-exceeded"), 1), false, 0.1},
		{"plain JSON", 503, fields{{"Content-Type", "application/json"}}, body, false, 0},
		{"a body that is no JSON", 503, problem, []byte("<html>busy</html>"), false, 0.1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ietf.ReadAnswer(tt.status, header(tt.h), tt.body)
			if got.ReducedCapacity != tt.reduced || math.Abs(got.Rate-tt.rate) > 1e-9 {
				t.Errorf("ReadAnswer = %+v, want reduced %v, rate %v", got, tt.reduced, tt.rate)
			}
		})
	}
}

// FuzzReadRateLimitHeaders: no input crashes the reader or yields a value
// a caller could misuse (negative counts, NaN or infinite rates, a wait
// beyond a year).
func FuzzReadRateLimitHeaders(f *testing.F) {
	seeds := [][3]string{
		{`"default";r=50;t=30`, `"default";q=100;w=10`, ""},
		{`"day";r=100;t=36000`, `"hour";q=1000;w=3600, "day";q=5000;w=86400`, "20"},
		{`"default";r=999;pk=:dHJpYWwxMjEzMjM=:`, `"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`, ""},
		{`"c";r=0`, `"c";q=3;qu="concurrent-requests"`, "Mon, 05 Aug 2019 09:27:05 GMT"},
		{`"a,b;c";r=1`, `"x\"y";q=1;w=1`, "-1"},
		{`;;;r=x`, `q=-1;w=0`, "99999999999999999999"},
		{`"d";r=1234567890123456;t=99999999999999`, `"d";q=0;w=1`, ""},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2])
	}
	sig := Signals{Headers: []HeaderSpec{{Preset: PresetIETF}}}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, rl, policy, retryAfter string) {
		h := http.Header{}
		for _, line := range strings.Split(rl, "\n") {
			h.Add("RateLimit", line)
		}
		for _, line := range strings.Split(policy, "\n") {
			h.Add("RateLimit-Policy", line)
		}
		h.Set("Retry-After", retryAfter)
		r := sig.ReadAnswer(503, h, []byte(policy))
		if r.Remaining < 0 || r.Concurrency < 0 || r.Reset < 0 || r.Reset > 367*24*time.Hour {
			t.Fatalf("out of range: %+v", r)
		}
		for _, v := range []float64{r.Rate, r.BytesRate} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("bad rate: %+v", r)
			}
		}
		if d, ok := Pause(h, r, now); ok && d < 0 {
			t.Fatalf("negative pause %v", d)
		}
	})
}
