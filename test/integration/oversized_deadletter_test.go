package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/deferral"
	"github.com/fleetbucket/fleetbucket/sdk/dispatch"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// A push the vendor refuses for good is dead-lettered even when it is
// larger than the dead-letter queue holds (here 256 KiB, as a deployed
// queue may): otherwise the dead letter fails, the job stays on its
// queue, and the lane pushes the same refused body at every lease. The
// vendor here refuses the credential (401, with nothing to refresh).
func TestOversizedRefusedPushIsDeadLettered(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	r := newLaneRig(t, lim, mockota.Config{Limit: lim, Credentials: []string{"another-token"}}, oneHotelConfig(lim, ""))
	r.linger, r.lease = 2*time.Second, 5*time.Second // one push carries all three changes
	const dlqBytes = 256 << 10
	if _, err := r.sqs.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{QueueUrl: &r.dlqURL,
		Attributes: map[string]string{"MaximumMessageSize": "262144"}}); err != nil {
		t.Fatal(err)
	}
	r.tune = func(d *dispatch.Dispatcher) { d.Queue.(*deferral.Queue).MaxMessageBytes = dlqBytes }
	// Three rooms' 31 days of nearly 8 KiB of values each (the most an
	// event may carry): a push of about 750 KB, within max_bytes.
	for i, room := range []string{"DBL", "TWN", "SGL"} {
		body := changeEvent(fmt.Sprintf("big-%d", i), int64(i+1), "rates", "2027-01-20", "2027-02-19", map[string]any{"note": strings.Repeat("x", 7_900)})
		r.enqueueBodies([]string{replaceRoom(body, room)})
	}

	r.run(1, 45*time.Second, 5*time.Second)

	refused := 0
	for _, req := range r.ota.Requests() {
		if req.Status == http.StatusUnauthorized {
			refused++
		}
	}
	dlq := r.receiveDLQ()
	if len(dlq) != 1 || refused != 1 {
		t.Fatalf("the vendor refused the push %d times and %d messages were dead-lettered (%v); want 1 refusal, dead-lettered once", refused, len(dlq), reasons(dlq))
	}
	for body, reason := range dlq {
		if len(body) > dlqBytes || !strings.Contains(reason, "401") {
			t.Errorf("dead letter of %d bytes (the queue holds %d) with reason %q; want it within the queue, naming the refusal", len(body), dlqBytes, reason)
		}
		t.Logf("dead letter: %d bytes, reason %q", len(body), reason[:min(len(reason), 200)])
	}
}
