package mockota

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

// Both enforcements grant exactly the burst at once, then one request per
// interval, never a microsecond early, for limits whose interval is a
// whole number of microseconds (GCRA rounds any other up; the window log
// does not).
func TestEnforcementsAgree(t *testing.T) {
	for _, mode := range []Enforcement{EnforceGCRA, EnforceWindow} {
		for _, l := range []gcra.Limit{{Rate: 10, Burst: 5}, {Rate: 1, Burst: 1}, {Rate: 0.5, Burst: 3}, {Rate: 20, Burst: 40}} {
			t.Run(fmt.Sprintf("%v/rate=%g,burst=%d", mode, l.Rate, l.Burst), func(t *testing.T) {
				s, c := start(t, Config{Limit: l, Enforce: mode})
				T := time.Duration(float64(time.Second) / l.Rate)
				n := 0
				take := func(want int) reply {
					t.Helper()
					n++
					r := post(t, s, "cred", "availability", "j"+strconv.Itoa(n))
					wantStatus(t, r, want, fmt.Sprintf("request %d", n))
					return r
				}
				for i := range l.Burst {
					r := take(http.StatusOK)
					if got, want := r.header.Get("X-RateLimit-Remaining"), strconv.Itoa(l.Burst-1-i); got != want {
						t.Errorf("request %d: X-RateLimit-Remaining %q, want %q", n, got, want)
					}
				}
				r := take(http.StatusTooManyRequests)
				if got, want := r.header.Get("Retry-After"), strconv.Itoa(int(max(1, (T+time.Second-1)/time.Second))); got != want {
					t.Errorf("Retry-After %q, want %q", got, want)
				}
				refillsExactly(t, s, c, T, l.Burst, take)
				if err := s.CheckWindows(); err != nil {
					t.Error(err)
				}
				w, broken := s.FullestWindow("cred", "availability")
				if broken || w.Ratio() != 1 {
					t.Errorf("FullestWindow %v (broken %v), want a window exactly at its bound", w, broken)
				}
			})
		}
	}
}

// With no enforcement the mock accepts everything, and the independent
// check catches it: the case a test of the check itself needs.
func TestCheckWindowsCatchesOverAcceptance(t *testing.T) {
	s, c := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 2}, Limits: map[string]gcra.Limit{"rates": {Rate: 1, Burst: 5}}, Enforce: EnforceNone})
	for i := range 4 {
		wantStatus(t, post(t, s, "cred", "availability", fmt.Sprint("a", i)), http.StatusOK, "no enforcement")
		wantStatus(t, post(t, s, "cred", "rates", fmt.Sprint("r", i)), http.StatusOK, "no enforcement")
	}
	c.Advance(time.Second)
	wantStatus(t, post(t, s, "cred", "availability", "late"), http.StatusOK, "no enforcement")
	if s.Count429() != 0 {
		t.Fatalf("%d 429s with no enforcement", s.Count429())
	}
	err := s.CheckWindows()
	if err == nil || !strings.Contains(err.Error(), "cred/availability") || strings.Contains(err.Error(), "cred/rates") {
		t.Fatalf("CheckWindows = %v, want availability (4 at once, burst 2) broken and rates (4 at once, burst 5) not", err)
	}
	w, broken := s.FullestWindow("cred", "availability")
	if !broken || w.Arrivals != 4 || w.Width() != 0 || w.Ratio() != 2 {
		t.Errorf("FullestWindow %v (broken %v), want 4 arrivals at one instant against a burst of 2", w, broken)
	}
	if _, broken := s.FullestWindow("cred", "rates"); broken {
		t.Error("rates: 4 at once broke a burst of 5?")
	}
}

// The same requests, enforced: refused ones are sent but not accepted.
func TestFullestWindowSentCountsRefusals(t *testing.T) {
	s, _ := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 2}, Enforce: EnforceWindow})
	for i := range 4 {
		post(t, s, "cred", "availability", fmt.Sprint("a", i))
	}
	if got := s.Count429(); got != 2 {
		t.Fatalf("Count429 %d, want 2", got)
	}
	if w, broken := s.FullestWindow("cred", "availability"); broken || w.Arrivals != 2 {
		t.Errorf("FullestWindow %v (broken %v), want the 2 accepted", w, broken)
	}
	if w, broken := s.FullestWindowSent("cred", "availability"); !broken || w.Arrivals != 4 {
		t.Errorf("FullestWindowSent %v (broken %v), want 4 sent, broken", w, broken)
	}
	if err := s.CheckWindows(); err != nil {
		t.Error(err)
	}
}

func TestParseEnforcement(t *testing.T) {
	for _, e := range []Enforcement{EnforceGCRA, EnforceWindow, EnforceNone} {
		if got, err := ParseEnforcement(e.String()); err != nil || got != e {
			t.Errorf("ParseEnforcement(%q) = %v, %v", e, got, err)
		}
	}
	if _, err := ParseEnforcement("token-bucket"); err == nil {
		t.Error("unknown enforcement accepted")
	}
}
