package mockota

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
)

// bucketKey is what the vendor meters by: the fleet shares one allowance per
// credential and endpoint, however many workers send.
type bucketKey struct{ credential, endpoint string }

// tats are a bucket's stored states, published and hidden, in µs (0 for a
// bucket never used, which GCRA treats as full).
type tats struct{ published, hidden int64 }

// verdict is the limiter's answer to one request.
type verdict struct {
	allowed bool
	// wait is, when denied, how long until the same request would conform
	// in every bucket that denied it (µs).
	wait int64
	// burst and remaining describe the published bucket, the only one the
	// vendor admits to.
	burst, remaining int
}

// take decides one request at now (µs) and charges a token only if every
// bucket grants: a request refused by the hidden limit must not drain the
// published bucket, or the X-RateLimit-Remaining a client sees would lie,
// and vice versa. The caller holds s.mu.
func (s *Server) take(k bucketKey, now int64) verdict {
	pl := s.cfg.limit(k.endpoint)
	if s.cfg.Enforce != EnforceGCRA {
		return s.takeWindow(k, now, pl)
	}
	st := s.buckets[k]
	pd := gcra.Decide(st.published, now, pl, 1, 0)
	allowed, wait := pd.Allowed, pd.RetryAfter
	var hd gcra.Decision
	if hl := s.cfg.HiddenLimit; hl != nil {
		hd = gcra.Decide(st.hidden, now, *hl, 1, 0)
		allowed = allowed && hd.Allowed
		// Each RetryAfter is exact for its own bucket, and buckets only
		// refill with time, so both conform at the later of the two.
		wait = max(wait, hd.RetryAfter)
	}
	if allowed {
		// Last, because Admit records what it accepts: only an arrival
		// every other limit accepts may enter the hidden log.
		if hw, ok := s.hiddenWindowAdmit(k, now); !ok {
			allowed, wait = false, max(wait, hw)
		}
	}
	if !allowed {
		return verdict{wait: wait, burst: pl.Burst, remaining: gcra.Remaining(st.published, now, pl)}
	}
	st.published = pd.TAT
	if s.cfg.HiddenLimit != nil {
		st.hidden = hd.TAT
	}
	s.buckets[k] = st
	return verdict{allowed: true, burst: pl.Burst, remaining: pd.Remaining}
}

// takeWindow decides with the mock's own sliding-window log, no gcra: the
// independent vendor. EnforceNone records the arrival in the log (so the
// headers stay meaningful) and accepts it whatever the log says. The caller
// holds s.mu.
func (s *Server) takeWindow(k bucketKey, now int64, pl gcra.Limit) verdict {
	g := s.windows[k]
	if g == nil {
		g = &window.Log{}
		s.windows[k] = g
	}
	d := g.Admit(time.UnixMicro(now), windowLimit(pl))
	if !d.Allowed && s.cfg.Enforce == EnforceNone {
		return verdict{allowed: true, burst: pl.Burst}
	}
	return verdict{allowed: d.Allowed, wait: (d.Wait + time.Microsecond - 1).Microseconds(), burst: pl.Burst, remaining: d.Remaining}
}

// setRateHeaders publishes the published bucket only: a vendor's hidden
// limit is exactly what its headers do not reveal.
func (s *Server) setRateHeaders(h http.Header, v verdict) {
	if s.cfg.OmitRateLimitHeaders {
		return
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(v.burst))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(v.remaining))
}

// retryAfter renders a wait of us µs from now. Both forms round up, never
// down: a client that obeys a rounded-down Retry-After arrives early and is
// refused again, which a strict vendor may count against it.
func retryAfter(now time.Time, us int64, httpDate bool) string {
	if httpDate {
		t := now.Add(time.Duration(us) * time.Microsecond).UTC()
		if r := t.Truncate(time.Second); !r.Equal(t) {
			t = r.Add(time.Second)
		}
		return t.Format(http.TimeFormat)
	}
	secs := (us + int64(time.Second/time.Microsecond) - 1) / int64(time.Second/time.Microsecond)
	return strconv.FormatInt(max(secs, 1), 10)
}

// hiddenWindowAdmit decides an arrival at now (µs) against the hidden
// window limit, if one is set, with the mock's own sliding-window log, and
// records it when accepted. It returns the wait (µs) when refused. The
// caller holds s.mu.
func (s *Server) hiddenWindowAdmit(k bucketKey, now int64) (int64, bool) {
	if s.hiddenWindow == nil {
		return 0, true
	}
	g := s.hiddenLogs[k]
	if g == nil {
		g = &window.Log{}
		s.hiddenLogs[k] = g
	}
	d := g.Admit(time.UnixMicro(now), *s.hiddenWindow)
	return (d.Wait + time.Microsecond - 1).Microseconds(), d.Allowed
}

// SetHiddenWindow sets, or with nil removes, a limit the vendor enforces on
// every (credential, endpoint) bucket without publishing it, on top of the
// published limit (and of Config.HiddenLimit): a vendor that lowers or
// raises an account's limit without notice, at runtime. It is decided with
// the mock's own sliding-window log (package window, no code shared with
// sdk/gcra), which starts empty at each change. It needs EnforceGCRA.
func (s *Server) SetHiddenWindow(l *window.Limit) error {
	if s.cfg.Enforce != EnforceGCRA {
		return fmt.Errorf("mockota: SetHiddenWindow needs Enforce EnforceGCRA, not %v", s.cfg.Enforce)
	}
	if l != nil {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("mockota: hidden window: %w", err)
		}
		l = &window.Limit{Rate: l.Rate, Burst: l.Burst}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hiddenWindow = l
	s.hiddenLogs = make(map[bucketKey]*window.Log)
	return nil
}
