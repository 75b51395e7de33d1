package sim

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// The vendor enforces a stricter burst than it publishes (burst 4 where
// the fleet is told 16, both at 2/s, decided with the mock's own sliding
// window log): the first wave earns 429s, each penalizes the fleet's
// bucket, every job still lands once, and the fleet stops earning 429s
// once it has backed off.
//
// The fleet's bucket starts full, so its opening wave is at most the
// published burst, granted at once and sent before any answer comes back
// (docs/design.md, Silences: a slot spent within SilenceAfter of its grant
// is the race every slot due at once runs); the vendor takes 4 of them and
// refuses the rest. So every 429 is among the first 16 requests, at most
// 12 of them. The first 429's Retry-After (1 s: the hidden window's wait,
// rounded up) empties the bucket for the whole fleet, slots booked ahead
// of it included, so no request after the opening wave reaches the vendor
// before that silence ends; the bucket then refills at the rate the vendor
// allows, and no more 429s come. A fleet that does not back off spends
// the slot it booked half a second in, inside the silence, and the vendor
// refuses it. The store answers at moto's latencies and at DynamoDB's.
func TestHiddenSubLimitPenalizesTheFleet(t *testing.T) {
	published := limiter.PerSecond(2, 16)
	hidden := window.Limit{Rate: 2, Burst: 4}
	for _, store := range []struct {
		name string
		lat  Latency
	}{
		{"moto", Latency{P50: 52 * time.Millisecond, P99: 170 * time.Millisecond}},
		{"DynamoDB", Latency{P50: 5 * time.Millisecond, P99: 25 * time.Millisecond}},
	} {
		t.Run(store.name, func(t *testing.T) {
			ota := startOTA(t, mockota.Config{Limit: published})
			if err := ota.SetHiddenWindow(&hidden); err != nil {
				t.Fatal(err)
			}
			synctest.Test(t, func(t *testing.T) {
				f := newPayloadFleet(t, ota, published, store.lat)
				silence := &firstSilence{}
				f.http = &http.Client{Transport: handlerTransport{h: ota, answered: silence.see}}
				jobs := payloadJobs(40, "rates")
				const workers = 10
				f.run(workers, jobs, 90*time.Second)
				f.assertExactlyOnce(jobs)

				reqs := ota.Requests()
				wave := published.Burst
				throttled := 0
				for i, r := range reqs {
					if r.Status != http.StatusTooManyRequests {
						continue
					}
					throttled++
					if i >= wave {
						t.Errorf("request %d of %d (job %s at +%v) answered 429: want 429s only in the opening wave of %d", i+1, len(reqs), r.JobID, r.At.Sub(f.start), wave)
					}
				}
				if throttled == 0 {
					t.Fatal("no 429: the hidden limit was never hit, so the test proves nothing")
				}
				if most := published.Burst - hidden.Burst; throttled > most {
					t.Errorf("%d requests answered 429, want at most %d (the opening wave less the hidden burst)", throttled, most)
				}
				heard, until := silence.get()
				if heard.IsZero() {
					t.Fatal("no 429 answer with a Retry-After reached the fleet")
				}
				if len(reqs) > wave && reqs[wave].At.Before(until) {
					t.Errorf("the first request after the opening wave (job %s) arrived at +%v, inside the silence the first 429 asked for (answered at +%v, until +%v)",
						reqs[wave].JobID, reqs[wave].At.Sub(f.start), heard.Sub(f.start), until.Sub(f.start))
				}
				t.Logf("40 jobs, hidden burst %d of %d, %d workers a queue: %d requests, %d answered 429; the first heard at +%v asked for silence until +%v; last accepted at +%v",
					hidden.Burst, published.Burst, workers, len(reqs), throttled, heard.Sub(f.start), until.Sub(f.start), f.lastAccepted())
			})
		})
	}
}

// firstSilence keeps the first 429 the fleet heard: when, and the end of
// the silence its Retry-After (in seconds, as the mock sends it) asked for.
type firstSilence struct {
	mu           sync.Mutex
	heard, until time.Time
}

func (s *firstSilence) see(resp *http.Response) {
	if resp.StatusCode != http.StatusTooManyRequests {
		return
	}
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil {
		return
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.heard.IsZero() || now.Before(s.heard) {
		s.heard, s.until = now, now.Add(time.Duration(secs)*time.Second)
	}
}

func (s *firstSilence) get() (heard, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heard, s.until
}
