package cli

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/job"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

type statesOut struct {
	Buckets []bucketState `json:"buckets"`
}

// bucketCLI is a CLI on a fresh limiter table with goodConfig, and a
// limiter of its own on that table to check what the commands did.
func bucketCLI(t *testing.T) (*cli, *limiter.Limiter) {
	db := emulator.DynamoDB(t)
	table := emulator.NewTable(t, db)
	c := newCLI(t, map[string]string{"FLEETBUCKET_TABLE": table, "FLEETBUCKET_CONNECTIONS": writeFile(t, "c.json", goodConfig)})
	lim, err := limiter.New(db, limiter.WithTable(table), limiter.WithDenialCacheAge(0))
	if err != nil {
		t.Fatal(err)
	}
	return c, lim
}

var availability = limiter.Bucket{Key: "bk#c1#availability", Limit: limiter.PerSecond(10, 20)}

// state, penalize and reset, read back by an independent limiter: the
// commands change the bucket every worker sees.
func TestStatePenalizeReset(t *testing.T) {
	c, lim := bucketCLI(t)
	ctx := context.Background()
	steps := []struct {
		name       string
		args       []string
		tokens     int
		fullAfter  [2]time.Duration // bounds
		headline   string
		takeWaits  [2]time.Duration // a Take by another worker is denied for this long (0: granted)
		textChecks []string
	}{
		// Full is burst 20 less what the default margin keeps free:
		// 10/s × 100ms = 1 token.
		{name: "fresh bucket is full", args: []string{"state", "bk", "c1", "availability"}, tokens: 19,
			textChecks: []string{"bucket      bk#c1#availability", "limit       10/s, burst 20, margin 100ms (19 at once)", "tokens      19 of 19", "tat         none (no item: the bucket is full)"}},
		{name: "penalize for 2m", args: []string{"penalize", "bk", "c1", "availability", "--for", "2m"}, tokens: 0,
			fullAfter: [2]time.Duration{2*time.Minute + 2*time.Second - 5*time.Second, 2*time.Minute + 2*time.Second},
			headline:  "penalized bk#c1#availability until ", takeWaits: [2]time.Duration{115 * time.Second, 2*time.Minute + 100*time.Millisecond}},
		{name: "reset refills", args: []string{"reset", "bk", "c1", "availability"}, tokens: 19,
			headline: "reset bk#c1#availability: penalties dropped"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			c.t = t
			text := c.run(s.args...).must(t)
			for _, w := range append(s.textChecks, s.headline) {
				if !strings.Contains(text, w) {
					t.Errorf("text output lacks %q:\n%s", w, text)
				}
			}
			out := decode[statesOut](t, c.run(append([]string{"state", "--json"}, s.args[1:4]...)...).must(t))
			if len(out.Buckets) != 1 {
				t.Fatalf("buckets = %+v, want one", out.Buckets)
			}
			b := out.Buckets[0]
			if b.Key != availability.Key || b.Tokens != s.tokens || b.Rate != 10 || b.Burst != 20 {
				t.Errorf("state = %+v, want %d tokens of bucket %s (10/s, burst 20)", b, s.tokens, availability.Key)
			}
			if fa := time.Duration(b.FullAfterSeconds * float64(time.Second)); fa < s.fullAfter[0] || fa > s.fullAfter[1] {
				t.Errorf("full after %v, want %v..%v", fa, s.fullAfter[0], s.fullAfter[1])
			}
			// Another worker's view.
			_, err := lim.Take(ctx, availability, 1)
			wait, denied := limiter.RetryAfter(err)
			switch {
			case s.takeWaits[1] == 0 && err != nil:
				t.Errorf("a worker's Take failed: %v, want a grant", err)
			case s.takeWaits[1] > 0 && (!denied || wait < s.takeWaits[0] || wait > s.takeWaits[1]):
				t.Errorf("a worker's Take = %v, want a denial for %v..%v", err, s.takeWaits[0], s.takeWaits[1])
			}
			if err == nil { // give the token back for the next step's count
				// (a Reset would not: the token's slot stays booked)
				_, err := emulator.DynamoDB(t).DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(lim.Table()),
					Key: map[string]types.AttributeValue{limiter.KeyAttribute: &types.AttributeValueMemberS{Value: availability.Key}}})
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// An endpoint's every bucket is shown, penalized and reset: extra windows,
// the property's share with --property, and every shard.
func TestEndpointBuckets(t *testing.T) {
	c, _ := bucketCLI(t)
	tests := []struct {
		name string
		args []string
		keys []string
	}{
		{"windows", []string{"bk", "c1", "rates"}, []string{"bk#c1#rates", "bk#c1#rates#w0"}},
		{"windows and share", []string{"bk", "c1", "rates", "--property", "h1"}, []string{"bk#c1#rates", "bk#c1#rates#w0", "bk#c1#rates#p#h1"}},
		{"shards", []string{"bk", "c1", "restrictions"}, []string{
			limiter.ShardKey("bk#c1#restrictions", 0), limiter.ShardKey("bk#c1#restrictions", 1),
			limiter.ShardKey("bk#c1#restrictions", 2), limiter.ShardKey("bk#c1#restrictions", 3)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			for _, cmd := range [][]string{{"penalize", "--for", "1m"}, {"state"}, {"reset"}} {
				out := decode[statesOut](t, c.run(append(append(cmd, "--json"), tt.args...)...).must(t))
				var keys []string
				for _, b := range out.Buckets {
					keys = append(keys, b.Key)
					if want := map[string]int{"reset": b.Capacity}[cmd[0]]; b.Tokens != want || b.Capacity >= b.Burst {
						t.Errorf("%s: %s has %d tokens, want %d (its capacity, less than burst %d by the default margin)", cmd[0], b.Key, b.Tokens, want, b.Burst)
					}
				}
				if strings.Join(keys, " ") != strings.Join(tt.keys, " ") {
					t.Errorf("%s: buckets %v, want %v", cmd[0], keys, tt.keys)
				}
			}
		})
	}
}

func TestStateTableNotFound(t *testing.T) {
	c, _ := bucketCLI(t)
	c.run("state", "bk", "c1", "availability", "--table", "no-such-table").fails(t, `fleetbucket: table "no-such-table" not found: create it with scripts/localstack.sh start`)
	if r := c.run("state", "bk", "c1", "availability", "--table", "no-such-table"); strings.Contains(r.stderr, "fleetbucket: fleetbucket:") {
		t.Errorf("the program's name twice: %s", r.stderr)
	}
}

type watchOut struct {
	Tokens int     `json:"tokens"`
	Burst  int     `json:"burst"`
	Rate   float64 `json:"grants_per_second"`
}

// watch reports the tokens and the grant rate another worker causes: 0/s
// on a quiet bucket, about 20/s while a worker takes a token every 50 ms.
func TestWatch(t *testing.T) {
	c, lim := bucketCLI(t)
	tests := []struct {
		name       string
		every      time.Duration // a worker takes a token this often (0: never)
		rate       [2]float64
		fullBucket bool
	}{
		{"quiet", 0, [2]float64{0, 0}, true},
		// A worker takes every 50 ms (20/s): watch must see grants, and
		// never more than the worker could take. How close to 20 it reads
		// depends on the machine's load, a timing claim this test leaves
		// to benchmarks (it read 6.6/s on a loaded CI machine).
		{"busy", 50 * time.Millisecond, [2]float64{1, 26}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			if err := lim.Reset(context.Background(), availability); err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			if tt.every > 0 {
				wg.Go(func() {
					tick := time.NewTicker(tt.every)
					defer tick.Stop()
					for {
						select {
						case <-ctx.Done():
							return
						case <-tick.C:
							_, _ = lim.Take(ctx, availability, 1)
						}
					}
				})
				time.Sleep(120 * time.Millisecond) // the bucket is busy when watching starts
			}
			r := c.run("watch", "bk", "c1", "availability", "--interval", "300ms", "--count", "3", "--json")
			stop()
			wg.Wait()
			lines := strings.Split(strings.TrimSpace(r.must(t)), "\n")
			if len(lines) != 3 {
				t.Fatalf("%d lines, want 3 (--count 3):\n%s", len(lines), r.stdout)
			}
			// Whether tokens fall or rise while busy is the machine's
			// business too (a loaded one takes slower than the refill).
			for _, l := range lines {
				w := decode[watchOut](t, l)
				if w.Rate < tt.rate[0] || w.Rate > tt.rate[1] || w.Burst != 20 || (tt.fullBucket && w.Tokens != 19) || w.Tokens < 0 || w.Tokens > 19 {
					t.Errorf("line %s: want grants/s in %v, burst 20, tokens within 0…19 (19 when quiet: the default margin keeps 10/s × 100ms free)", l, tt.rate)
				}
			}
		})
	}
	text := c.run("watch", "bk", "c1", "availability", "--interval", "50ms", "--count", "1").must(t)
	if !strings.Contains(text, "watching bk#c1#availability (burst 20) every 50ms; Ctrl-C stops") || !strings.Contains(text, "grants/s") {
		t.Errorf("text output:\n%s", text)
	}
}

// Ctrl-C ends a watch with exit 0.
func TestWatchStopsOnCancel(t *testing.T) {
	c, _ := bucketCLI(t)
	var stdout, stderr strings.Builder
	app := &App{Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return c.env[k] },
		AWSConfig:       func(context.Context) (aws.Config, error) { return *c.aws, nil },
		DynamoDBOptions: []func(*dynamodb.Options){emulator.ForEmulator}}
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	if code := app.Main(ctx, []string{"watch", "bk", "c1", "availability", "--interval", "200ms"}); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("watch ran %v after its context ended", d)
	}
	if n := strings.Count(stdout.String(), "grants/s"); n < 1 || n > 4 {
		t.Errorf("%d readings in 700ms at 200ms, want 1..4:\n%s", n, stdout.String())
	}
}

// meteredConfig has two endpoints counting against one meter, "ari".
const meteredConfig = `{
  "channels": {
    "bk": {
      "base_url": "https://x.example/api",
      "endpoints": {
        "availability": {"path": "/a", "meter": "ari", "limit": {"rate": 10, "burst": 20}},
        "restrictions": {"path": "/s", "meter": "ari", "limit": {"rate": 10, "burst": 20}}
      },
      "credentials": {"c1": {"token_env": "T"}}
    }
  },
  "properties": {"h1": [{"channel": "bk", "credential": "c1", "hotel_ref": "R1"}]}
}`

// penalize and reset on an endpoint with a meter act on the bucket the
// workers draw from (channel#credential#meter), as the sync function
// routes a job there, and leave no item under the endpoint's own name.
func TestCLIAddressesTheMeterBucket(t *testing.T) {
	db := emulator.DynamoDB(t)
	table := emulator.NewTable(t, db)
	file := writeFile(t, "c.json", meteredConfig)
	c := newCLI(t, map[string]string{"FLEETBUCKET_TABLE": table, "FLEETBUCKET_CONNECTIONS": file})
	lim, err := limiter.New(db, limiter.WithTable(table), limiter.WithDenialCacheAge(0))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	worker := &syncer.Syncer{Config: cfg, Token: func(string) string { return "token" }}
	ctx := context.Background()
	// take is a worker's Take on the bucket its route for endpoint draws
	// from: nil when granted.
	take := func(endpoint string) error {
		t.Helper()
		route, err := worker.Route(job.Job{ID: "j", Channel: "bk", Credential: "c1", Endpoint: endpoint, FirstSeen: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if route.Bucket.Key != "bk#c1#ari" {
			t.Fatalf("the worker's bucket for %s is %q, want the meter's, bk#c1#ari", endpoint, route.Bucket.Key)
		}
		_, err = lim.Take(ctx, route.Bucket, 1)
		return err
	}
	out := decode[statesOut](t, c.run("penalize", "--json", "bk", "c1", "availability", "--for", "2m").must(t))
	if len(out.Buckets) != 1 || out.Buckets[0].Key != "bk#c1#ari" {
		t.Errorf("penalize acted on %+v, want the meter's bucket bk#c1#ari", out.Buckets)
	}
	for _, ep := range []string{"availability", "restrictions"} {
		if wait, denied := limiter.RetryAfter(take(ep)); !denied || wait < time.Minute {
			t.Errorf("after penalize: a worker pushing to %s was not denied (wait %v), want a denial for about 2m", ep, wait)
		}
	}
	phantom, err := lim.State(ctx, limiter.Bucket{Key: "bk#c1#availability", Limit: limiter.PerSecond(10, 20)})
	if err != nil {
		t.Fatal(err)
	}
	if !phantom.TAT.IsZero() {
		t.Errorf("an item under the endpoint's own name, bk#c1#availability (tat %v): no worker draws from it", phantom.TAT)
	}
	c.run("reset", "bk", "c1", "restrictions").must(t)
	for _, ep := range []string{"availability", "restrictions"} {
		if err := take(ep); err != nil {
			t.Errorf("after reset: a worker pushing to %s got %v, want a grant", ep, err)
		}
	}
}
