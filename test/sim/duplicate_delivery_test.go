package sim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/lane"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/internal/connconfig"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// Two deliveries of one change at once (SQS hands a message out twice,
// or the visibility timeout ran out during its first invocation): each
// marks the lanes with its own token, so only the first owns them and
// only it pushes; a redelivery's recheck finds the lanes served and sends
// nothing. With a token that both deliveries share, both would push
// without a claim. Each delivery runs on a worker of its own (its own
// limiter and dispatcher) over one store; that SQS hands a message out
// twice is what the test plays, the redelivery flag included.
func TestDuplicateDeliveryPushesALaneOnce(t *testing.T) {
	lim := limiter.PerSecond(20, 10)
	const lanes = 3
	for _, tt := range []struct {
		name        string
		redelivered bool // the second copy's receive count says so
	}{
		{"a duplicate receive", false},
		{"a redelivery", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := newMemLanes(t, mockota.Config{Limit: limiter.PerSecond(100, 50)}, connconfig.Credentials(lim, lanes), nil)
			m.sy.Lanes.Lease = 2 * time.Second // m's worker delivers the rechecks
			src := newPMSOracle("hotel-aurora")
			body := src.change("rates", "DBL", "2027-01-05", "2027-01-07", 1)
			gate := &markGate{want: 2, all: make(chan struct{})}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			outs := make([]syncer.MessageResult, 2)
			for i := range outs {
				sy := m.worker(&lane.Store{DB: gatedMarks{DynamoDBAPI: m.store, gate: gate}, Table: "state", Lease: 2 * time.Second, Now: m.clock.Now}, nil)
				msg := syncer.Message{ID: "1", Body: body, Redelivered: i == 1 && tt.redelivered}
				wg.Go(func() { outs[i] = sy.HandleBatch(ctx, []syncer.Message{msg})[0] })
			}
			wg.Wait()
			scheduled := 0
			for _, out := range outs {
				if out.Err != nil {
					t.Fatalf("delivery: %+v", out)
				}
				scheduled += out.Change.Scheduled
				m.results = append(m.results, out.Jobs...)
			}
			if scheduled != lanes {
				t.Errorf("the two deliveries scheduled %d pushes, want %d (one per lane)", scheduled, lanes)
			}
			m.pending = append(m.pending, m.sent.takeJobs(t, deferredURL)...)
			m.drain(100) // the redelivery's rechecks
			pushes := map[string]int{}
			for _, q := range m.ota.Accepted() {
				// A lane job's id is the lane (…#hotel ref) @ its owner token.
				name, _, _ := strings.Cut(q.JobID, "@")
				pushes[name[strings.LastIndex(name, "#")+1:]]++
			}
			for i := 1; i <= lanes; i++ {
				ref := fmt.Sprintf("BK-%d", i)
				if pushes[ref] != 1 {
					t.Errorf("lane %s pushed %d times, want once (pushes %v)", ref, pushes[ref], pushes)
				}
				src.assertNewest(t, m.ota, ref)
			}
			for name := range memLaneItem(t, m.store, "hotel-aurora#rates") {
				if strings.HasPrefix(name, "o:") || strings.HasPrefix(name, "d:") {
					t.Errorf("lane item still holds %s: want every lane released with nothing pending", name)
				}
			}
		})
	}
}

// gatedMarks holds each mark (an update that ADDs to a lane's pending set
// and asks for the whole item back) at gate after it is written, so that
// what the deliveries do next overlaps for certain.
type gatedMarks struct {
	lane.DynamoDBAPI
	gate *markGate
}

func (g gatedMarks) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := g.DynamoDBAPI.UpdateItem(ctx, in, o...)
	if in.ReturnValues == types.ReturnValueAllNew && strings.HasPrefix(*in.UpdateExpression, "ADD ") {
		g.gate.arrive(ctx)
	}
	return out, err
}

// markGate holds each caller of arrive until want of them came (or its
// context ends).
type markGate struct {
	mu   sync.Mutex
	want int
	all  chan struct{}
}

func (g *markGate) arrive(ctx context.Context) {
	g.mu.Lock()
	if g.want--; g.want == 0 {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-ctx.Done():
	}
}
