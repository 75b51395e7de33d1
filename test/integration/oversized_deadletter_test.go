package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/queue"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// dlqBytes is what the tests' dead-letter queues hold, as a deployed queue
// may: 256 KiB.
const dlqBytes = 256 << 10

func (p *pipeline) shrinkDLQ(t *testing.T) {
	t.Helper()
	if _, err := p.sqs.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{QueueUrl: &p.dlqURL,
		Attributes: map[string]string{"MaximumMessageSize": fmt.Sprint(dlqBytes)}}); err != nil {
		t.Fatal(err)
	}
}

// A push the vendor refuses for good is dead-lettered even when what goes
// to the dead-letter queue is larger than the queue holds: otherwise the
// dead letter fails, the job stays on its queue, and the same refused
// body goes out again at every delivery (a lane's, at every lease). A
// lane's dead letter is its job, which names the lane, not the body: the
// lane case keeps that path safe; a payload job carries its body and is
// sent as a reference (queue.Reference).
func TestOversizedRefusedPushIsDeadLettered(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	t.Run("lane push", func(t *testing.T) {
		// The vendor refuses every push (400): the merged push is taken
		// apart until each change is alone, and each change is
		// dead-lettered once, as a job naming the lane and the change
		// (not its body), and leaves the lane.
		r := newLaneRig(t, lim, mockota.Config{Limit: lim}, oneHotelConfig(lim, ""))
		r.ota.FailMatching(http.StatusBadRequest, func(mockota.Request) bool { return true })
		r.linger, r.lease = 2*time.Second, 5*time.Second // one push carries all three changes
		r.shrinkDLQ(t)
		r.tune = func(d *dispatch.Dispatcher) { d.Queue.(*queue.Queue).MaxMessageBytes = dlqBytes }
		// Three rooms' 31 days of nearly 8 KiB of values each (the most an
		// event may carry): a push of about 750 KB, within max_bytes.
		for i, room := range []string{"DBL", "TWN", "SGL"} {
			body := changeEvent(fmt.Sprintf("big-%d", i), int64(i+1), "rates", "2027-01-20", "2027-02-19", map[string]any{"note": strings.Repeat("x", 7_900)})
			r.enqueueBodies([]string{replaceRoom(body, room)})
		}
		r.run(1, 45*time.Second, 5*time.Second)
		dlq := r.receiveDLQ()
		if len(dlq) != 3 {
			t.Fatalf("%d dead letters (%v), want each of the 3 refused changes once", len(dlq), reasons(dlq))
		}
		for body, reason := range dlq {
			if len(body) > dlqBytes || !strings.Contains(reason, "400") {
				t.Errorf("dead letter of %d bytes (the queue holds %d) with reason %q; want it within the queue, naming the refusal", len(body), dlqBytes, reason)
			}
		}
		// One merged push, then halves until each change is alone:
		// 2·⌈log₂ 3⌉ = 4 more at most.
		if n := len(r.ota.Requests()); n > 5 {
			t.Errorf("the vendor got %d requests, want at most 5", n)
		}
		if n := pendingIn(t, r, "hotel-aurora#rates", "booking_com#cred-1#BK-1001"); n != 0 {
			t.Errorf("the lane keeps %d refused changes pending, want none (they are dead-lettered)", n)
		}
	})
	t.Run("payload job", func(t *testing.T) {
		// A payload job of 400 KB, which its queue held, refused (400):
		// the job goes to the dead-letter queue, which holds 256 KiB.
		p := newPipeline(t, lim, mockota.Config{Limit: lim})
		p.shrinkDLQ(t)
		j := pushJob(1, "rates", time.Now())
		j.Payload = []byte(`{"blob":"` + strings.Repeat("x", 400_000) + `"}`)
		p.ota.FailNext(j.ID, http.StatusBadRequest, 100)
		p.enqueue([]job.Job{j})
		p.run(1, 20*time.Second, func() bool {
			return len(p.ota.Requests()) > 0 && p.depth(p.changesURL)+p.depth(p.deferredURL) == 0
		}, workerOpts{})
		assertDeadLetteredOnce(t, p, http.StatusBadRequest)
	})
}

// assertDeadLetteredOnce checks that the vendor refused one push, with
// status, and that one message, within the dead-letter queue's size and
// naming the refusal, was dead-lettered.
func assertDeadLetteredOnce(t *testing.T, p *pipeline, status int) {
	t.Helper()
	refused := 0
	for _, req := range p.ota.Requests() {
		if req.Status == status {
			refused++
		}
	}
	dlq := p.receiveDLQ()
	if len(dlq) != 1 || refused != 1 {
		t.Fatalf("the vendor refused the push %d times and %d messages were dead-lettered (%v); want 1 refusal, dead-lettered once", refused, len(dlq), reasons(dlq))
	}
	for body, reason := range dlq {
		if len(body) > dlqBytes || !strings.Contains(reason, fmt.Sprint(status)) {
			t.Errorf("dead letter of %d bytes (the queue holds %d) with reason %q; want it within the queue, naming the refusal", len(body), dlqBytes, reason)
		}
		t.Logf("dead letter: %d bytes, reason %q", len(body), reason[:min(len(reason), 160)])
	}
}

// reasons lists a dead-letter queue's reasons, without the bodies.
func reasons(dlq map[string]string) []string {
	var out []string
	for _, reason := range dlq {
		out = append(out, reason)
	}
	return out
}
