package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
)

// The helpers below run the real pipeline types (limiter, dispatcher,
// syncer, lanes) on the simulation's in-memory DynamoDB (DB, with no
// latency) and a test's manual clock, against the mock OTA on loopback,
// with the test as the queues: the tests that use them check the
// pipeline's logic, and replay it exactly, without the emulators'
// real-time cost. What DynamoDB and SQS themselves do stays in
// test/integration.

// newClock is the tests' time, which moves only when a test says
// (limitertest.Clock), from a fixed noon.
func newClock() *limitertest.Clock {
	return limitertest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
}

// memStore is an empty in-memory DynamoDB with the limiter's table
// ("limits") and the ARI state table ("state").
func memStore(t *testing.T) *DB {
	t.Helper()
	db := NewDB(rand.New(rand.NewPCG(1, 1)), Latency{})
	db.checkItems = true
	if err := limiter.CreateTable(context.Background(), db, "limits"); err != nil {
		t.Fatal(err)
	}
	if err := ari.CreateTable(context.Background(), db, "state"); err != nil {
		t.Fatal(err)
	}
	return db
}

// sentMessages is a queue.SQSAPI that keeps every message sent, by queue
// URL, for the test to deliver when its clock says.
type sentMessages struct {
	mu     sync.Mutex
	bodies map[string][]string
	// reasons are the dead letters' reasons (queue.ReasonAttribute), by body.
	reasons map[string]string
	n       int
}

func (s *sentMessages) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bodies == nil {
		s.bodies = map[string][]string{}
	}
	url := aws.ToString(in.QueueUrl)
	s.bodies[url] = append(s.bodies[url], aws.ToString(in.MessageBody))
	if r, ok := in.MessageAttributes[queue.ReasonAttribute]; ok {
		if s.reasons == nil {
			s.reasons = map[string]string{}
		}
		s.reasons[aws.ToString(in.MessageBody)] = aws.ToString(r.StringValue)
	}
	s.n++
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprint(s.n))}, nil
}

// take removes and returns the messages sent to url so far.
func (s *sentMessages) take(url string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.bodies[url]
	delete(s.bodies, url)
	return b
}

// deadLetters takes the messages sent to url, with their reasons.
func (s *sentMessages) deadLetters(url string) map[string]string {
	out := map[string]string{}
	for _, b := range s.take(url) {
		s.mu.Lock()
		out[b] = s.reasons[b]
		s.mu.Unlock()
	}
	return out
}

// takeJobs is take, decoded.
func (s *sentMessages) takeJobs(t *testing.T, url string) []job.Job {
	t.Helper()
	var out []job.Job
	for _, b := range s.take(url) {
		j, err := job.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, j)
	}
	return out
}

// oneRoute routes the booking_com channel's jobs to the mock OTA, every
// endpoint under one limit.
type oneRoute struct {
	ota      *mockota.Server
	limit    limiter.Limit
	adaptive *limiter.Adaptive
}

func (r oneRoute) Route(j job.Job) (dispatch.Route, error) {
	if j.Channel != "booking_com" {
		return dispatch.Route{}, fmt.Errorf("unknown channel %q", j.Channel)
	}
	return dispatch.Route{
		Bucket: limiter.Bucket{Key: config.BucketKey(j.Channel, j.Credential, j.Endpoint), Limit: r.limit, Adaptive: r.adaptive},
		URL:    r.ota.URL() + "/v1/" + j.Endpoint,
		Header: http.Header{"Authorization": {"Bearer " + j.Credential}},
	}, nil
}

func startOTA(t *testing.T, c mockota.Config) *mockota.Server {
	t.Helper()
	srv, err := mockota.Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// pmsOracle numbers one property's changes and remembers the newest value
// of every date: what the OTA's copy must end with.
type pmsOracle struct {
	property string
	seq      int64
	newest   map[otacopy.Day]otacopy.Held
	bodies   []string
}

func newPMSOracle(property string) *pmsOracle {
	return &pmsOracle{property: property, newest: map[otacopy.Day]otacopy.Held{}}
}

func (p *pmsOracle) change(kind, room, from, to string, value int) string {
	p.seq++
	c := ari.Change{EventID: fmt.Sprintf("%s-ev-%d", p.property, p.seq), PropertyID: p.property, Sequence: p.seq, Kind: kind,
		RoomType: room, RatePlan: "BAR", From: from, To: to, Values: map[string]any{"v": value}}
	for _, d := range c.Dates() {
		k := otacopy.Day{HotelRef: p.property, Kind: kind, RoomType: room, RatePlan: "BAR", Date: d}
		if p.newest[k].Sequence < c.Sequence {
			p.newest[k] = otacopy.Held{Sequence: c.Sequence, Values: otacopy.Values(c.Values)}
		}
	}
	body := changeEnvelope(c)
	p.bodies = append(p.bodies, body)
	return body
}

// changeEnvelope is a PMS change in its EventBridge envelope.
func changeEnvelope(c ari.Change) string {
	detail, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return fmt.Sprintf(`{"version":"0","id":%q,"detail-type":"ARI change","source":"pms","time":"2026-11-30T12:00:00Z","detail":%s}`, c.EventID, detail)
}

// assertNewest checks every date the PMS changed against the OTA's copy.
func (p *pmsOracle) assertNewest(t *testing.T, ota *mockota.Server, hotelRef string) {
	t.Helper()
	c, err := otacopy.Build(ota.Accepted())
	if err != nil {
		t.Fatal(err)
	}
	stale := 0
	for k, want := range p.newest {
		k.HotelRef = hotelRef
		got, ok := c.Held(k)
		if !ok || got.Sequence != want.Sequence || got.Values != want.Values {
			stale++
			if stale <= 5 {
				t.Errorf("%+v: the OTA holds %+v, want sequence %d %s", k, got, want.Sequence, want.Values)
			}
		}
	}
	if stale > 0 {
		t.Errorf("%d of %d dates stale at the OTA", stale, len(p.newest))
	}
}
