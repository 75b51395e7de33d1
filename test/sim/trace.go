package sim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
)

// A push trace, for what-if analyses of the limiter (cmd in
// test/sim/whatif): with FLEETBUCKET_SIM_PUSH_TRACE naming a file, the run
// records which execution environment made each OTA request and each
// limiter write, and when each invocation ran. One record a line, times in
// µs of simulated time from the run's start:
//
//	P <t> <env> <bucket> <status> <job>  an OTA request (bucket: channel/token/endpoint; job: its X-Job-Id, - if none)
//	W <t> <env> <pk> <ok|cond|err>    a limits-table UpdateItem and its outcome
//	I <start> <end> <env>             an invocation (sweeps included)
//	D <t> <env> <job> <delay> <askAt> <notBefore>  a job sent to the deferred queue (delay in s; the job's turn and
//	                                  earliest time in µs of the run, - if none)
//	R <t> <env> <job>                 a deferred job received by an invocation
//	S changes <n> load_end <t> ended <t>  the run's totals, last
//
// The trace only observes: it takes no simulated time and changes no call.
type pushTrace struct {
	path  string
	start time.Time

	mu    sync.Mutex
	lines []string
	envs  int
}

// newPushTrace is the trace FLEETBUCKET_SIM_PUSH_TRACE asks for, or nil.
func newPushTrace(start time.Time) *pushTrace {
	p := os.Getenv("FLEETBUCKET_SIM_PUSH_TRACE")
	if p == "" {
		return nil
	}
	return &pushTrace{path: p, start: start}
}

func (t *pushTrace) at(when time.Time) int64 { return when.Sub(t.start).Microseconds() }

func (t *pushTrace) add(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	t.mu.Lock()
	t.lines = append(t.lines, line)
	t.mu.Unlock()
}

// newEnv numbers an execution environment in the order they were created.
func (t *pushTrace) newEnv() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.envs++
	return t.envs - 1
}

func (t *pushTrace) invocation(env int, from, to time.Time) {
	t.add("I %d %d %d", t.at(from), t.at(to), env)
}

// write saves the trace with the run's totals.
func (t *pushTrace) write(st Stats) error {
	f, err := os.Create(t.path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	t.mu.Lock()
	for _, l := range t.lines {
		w.WriteString(l)
		w.WriteByte('\n')
	}
	t.mu.Unlock()
	fmt.Fprintf(w, "S changes %d load_end %d ended %d\n", st.Changes, st.LoadEnd.Microseconds(), st.EndedAt.Microseconds())
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tracedTransport records each OTA request of one environment at its
// arrival, which is when the vendor meters it.
type tracedTransport struct {
	next  http.RoundTripper
	env   int
	trace *pushTrace
}

func (t *tracedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	at := time.Now()
	bucket := strings.TrimSuffix(r.URL.Host, ".sim") + "/" + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") + "/" +
		strings.TrimPrefix(r.URL.Path, "/v1/")
	resp, err := t.next.RoundTrip(r)
	status := "err"
	if err == nil {
		status = fmt.Sprint(resp.StatusCode)
	}
	t.trace.add("P %d %d %s %s %s", t.trace.at(at), t.env, bucket, status, orDash(r.Header.Get("X-Job-Id")))
	return resp, err
}

// tracedDB is one environment's view of the store: it records the
// limiter's writes and passes everything through. Embedding keeps every
// method of DB, so the limiter finds the same capabilities
// (TransactWriteItems) as on DB itself.
type tracedDB struct {
	*DB
	env   int
	trace *pushTrace
}

func (d tracedDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	at := time.Now()
	out, err := d.DB.UpdateItem(ctx, in, opts...)
	if aws.ToString(in.TableName) == "limits" {
		pk := ""
		if v, ok := in.Key[limiter.KeyAttribute].(*types.AttributeValueMemberS); ok {
			pk = v.Value
		}
		outcome := "ok"
		var ccf *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &ccf):
			outcome = "cond"
		case err != nil:
			outcome = "err"
		}
		d.trace.add("W %d %d %s %s", d.trace.at(at), d.env, strings.ReplaceAll(pk, " ", "_"), outcome)
	}
	return out, err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// tracedSQS records the jobs one environment sends to the deferred queue.
type tracedSQS struct {
	*SQS
	env   int
	trace *pushTrace
}

func (q tracedSQS) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	at := time.Now()
	if aws.ToString(in.QueueUrl) == "deferred" {
		if j, err := job.Decode(aws.ToString(in.MessageBody)); err == nil {
			q.trace.add("D %d %d %s %d %s %s", q.trace.at(at), q.env, j.ID, in.DelaySeconds, q.trace.atOrDash(j.AskAt), q.trace.atOrDash(j.NotBefore))
		}
	}
	return q.SQS.SendMessage(ctx, in, opts...)
}

func (t *pushTrace) atOrDash(when time.Time) string {
	if when.IsZero() {
		return "-"
	}
	return fmt.Sprint(t.at(when))
}

// received records the deferred jobs an invocation of env took.
func (t *pushTrace) received(env int, msgs []*Message) {
	at := time.Now()
	for _, m := range msgs {
		if j, err := job.Decode(m.Body); err == nil {
			t.add("R %d %d %s", t.at(at), env, j.ID)
		}
	}
}
