package credentials

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest"
)

// fakeSM is a Secrets Manager with one value per secret id, counting reads.
type fakeSM struct {
	mu     sync.Mutex
	values map[string]*string
	fail   error
	calls  atomic.Int32
	// gate, if set, holds every read until it is closed.
	gate chan struct{}
}

func (f *fakeSM) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.calls.Add(1)
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	v, ok := f.values[aws.ToString(in.SecretId)]
	if !ok {
		return nil, errors.New("ResourceNotFoundException: Secrets Manager can't find the specified secret")
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: v}, nil
}

func (f *fakeSM) set(id string, v *string, fail error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.values[id], f.fail = v, fail
}

const ref = SecretRefPrefix + "fleetbucket/bk-main"

func TestTokenCachesForTTLAndRereads(t *testing.T) {
	sm := &fakeSM{values: map[string]*string{"fleetbucket/bk-main": aws.String("tok-1\n")}}
	clk := limitertest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(sm, WithTTL(time.Minute), WithClock(clk.Now))
	ctx := context.Background()

	steps := []struct {
		name    string
		advance time.Duration
		rotate  string // new secret value before the step, if set
		inval   bool   // Invalidate before the step
		want    string
		calls   int32
	}{
		{"first use reads the secret (trimmed)", 0, "", false, "tok-1", 1},
		{"within the TTL: from memory", 59 * time.Second, "", false, "tok-1", 1},
		{"rotated, still within the TTL: the old copy", 0, "tok-2", false, "tok-1", 1},
		{"after the TTL: read again", 2 * time.Second, "", false, "tok-2", 2},
		{"rotated again, then invalidated (a 401): read at once", time.Second, "tok-3", true, "tok-3", 3},
		{"and cached again", time.Second, "", false, "tok-3", 3},
	}
	for _, st := range steps {
		clk.Advance(st.advance)
		if st.rotate != "" {
			sm.set("fleetbucket/bk-main", aws.String(st.rotate), nil)
		}
		if st.inval {
			c.Invalidate(ref)
		}
		got, err := c.Token(ctx, ref)
		if err != nil || got != st.want || sm.calls.Load() != st.calls {
			t.Fatalf("%s: Token = %q, %v after %d reads; want %q after %d", st.name, got, err, sm.calls.Load(), st.want, st.calls)
		}
	}
}

func TestTokenErrors(t *testing.T) {
	boom := errors.New("AccessDeniedException: not authorized to perform secretsmanager:GetSecretValue")
	tests := []struct {
		name    string
		ref     string
		value   *string
		fail    error
		env     map[string]string
		want    string
		notSet  bool
		noSMSet bool
	}{
		{"env ref", "BK_TOKEN", nil, nil, map[string]string{"BK_TOKEN": "env-tok"}, "", false, true},
		{"env ref unset", "BK_TOKEN", nil, nil, nil, `environment variable "BK_TOKEN" is empty`, true, true},
		{"secret missing", SecretRefPrefix + "nope", nil, nil, nil, `secret "nope": ResourceNotFoundException`, false, false},
		{"access denied", ref, aws.String("x"), boom, nil, `secret "fleetbucket/bk-main": AccessDeniedException`, false, false},
		{"binary secret", ref, nil, nil, nil, "has no SecretString", true, false},
		{"empty secret", ref, aws.String("  \n"), nil, nil, `secret "fleetbucket/bk-main" is empty`, true, false},
		{"no client", ref, nil, nil, nil, "no Secrets Manager client", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sm := &fakeSM{values: map[string]*string{}}
			if tt.name != "secret missing" {
				sm.values["fleetbucket/bk-main"] = tt.value
			}
			sm.fail = tt.fail
			var api SecretsManagerAPI = sm
			if tt.name == "no client" {
				api = nil
			}
			c := New(api, WithGetenv(func(k string) string { return tt.env[k] }))
			got, err := c.Token(context.Background(), tt.ref)
			if tt.want == "" {
				if err != nil || got != "env-tok" {
					t.Fatalf("Token = %q, %v; want env-tok", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Token = %q, %v; want an error containing %q", got, err, tt.want)
			}
			if errors.Is(err, ErrNotSet) != tt.notSet {
				t.Fatalf("errors.Is(%v, ErrNotSet) = %v, want %v", err, !tt.notSet, tt.notSet)
			}
			if tt.noSMSet && sm.calls.Load() != 0 {
				t.Fatalf("%d Secrets Manager calls, want none", sm.calls.Load())
			}
		})
	}
}

// While Secrets Manager fails, a token a little past its TTL is still used
// (the OTA, not a blip, decides when a token is bad); one past MaxStale,
// or one invalidated, is not.
func TestStaleOnError(t *testing.T) {
	sm := &fakeSM{values: map[string]*string{"fleetbucket/bk-main": aws.String("tok-1")}}
	clk := limitertest.NewClock(time.Unix(1_800_000_000, 0))
	c := New(sm, WithTTL(time.Minute), WithMaxStale(10*time.Minute), WithClock(clk.Now))
	ctx := context.Background()
	if _, err := c.Token(ctx, ref); err != nil {
		t.Fatal(err)
	}
	sm.set("fleetbucket/bk-main", aws.String("tok-1"), errors.New("ThrottlingException"))
	clk.Advance(5 * time.Minute)
	if got, err := c.Token(ctx, ref); got != "tok-1" || err != nil {
		t.Fatalf("4 min past the TTL with Secrets Manager down: Token = %q, %v; want the cached tok-1", got, err)
	}
	clk.Advance(6 * time.Minute)
	if got, err := c.Token(ctx, ref); err == nil {
		t.Fatalf("10 min past the TTL: Token = %q, want the error", got)
	}
	sm.set("fleetbucket/bk-main", aws.String("tok-2"), nil)
	if got, err := c.Token(ctx, ref); got != "tok-2" || err != nil {
		t.Fatalf("Secrets Manager back: Token = %q, %v; want tok-2", got, err)
	}
	sm.set("fleetbucket/bk-main", aws.String("tok-2"), errors.New("ThrottlingException"))
	c.Invalidate(ref)
	if got, err := c.Token(ctx, ref); err == nil {
		t.Fatalf("invalidated and Secrets Manager down: Token = %q, want the error (never the refused token)", got)
	}
}

// Concurrent first uses make one read; waiters give up with their context.
func TestConcurrentFirstUseReadsOnce(t *testing.T) {
	sm := &fakeSM{values: map[string]*string{"fleetbucket/bk-main": aws.String("tok")}, gate: make(chan struct{})}
	c := New(sm)
	const n = 50
	var wg sync.WaitGroup
	var bad atomic.Int32
	for range n {
		wg.Go(func() {
			if tok, err := c.Token(context.Background(), ref); tok != "tok" || err != nil {
				bad.Add(1)
			}
		})
	}
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	for sm.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.Token(short, ref); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a waiter whose context ends: err = %v, want DeadlineExceeded", err)
	}
	close(sm.gate)
	wg.Wait()
	if bad.Load() != 0 || sm.calls.Load() != 1 {
		t.Fatalf("%d of %d callers failed, %d reads; want none failed and 1 read", bad.Load(), n, sm.calls.Load())
	}
}

// An Invalidate during a read makes the next call read again: the read in
// flight may have fetched the token the OTA just refused.
func TestInvalidateDuringRead(t *testing.T) {
	sm := &fakeSM{values: map[string]*string{"fleetbucket/bk-main": aws.String("old")}, gate: make(chan struct{})}
	c := New(sm)
	done := make(chan string)
	go func() {
		tok, _ := c.Token(context.Background(), ref)
		done <- tok
	}()
	for sm.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	c.Invalidate(ref)
	close(sm.gate)
	if tok := <-done; tok != "old" {
		t.Fatalf("the read in flight returned %q, want old", tok)
	}
	sm.set("fleetbucket/bk-main", aws.String("new"), nil)
	if tok, err := c.Token(context.Background(), ref); tok != "new" || err != nil || sm.calls.Load() != 2 {
		t.Fatalf("after the Invalidate: Token = %q, %v after %d reads; want new after 2", tok, err, sm.calls.Load())
	}
}

func TestLookupHook(t *testing.T) {
	sm := &fakeSM{values: map[string]*string{}}
	var seen []string
	hook := New(sm, WithGetenv(func(k string) string { return map[string]string{"T": "env"}[k] })).
		Lookup(time.Second, func(ref string, err error) { seen = append(seen, ref+": "+err.Error()) })
	if got, err := hook("T"); got != "env" || err != nil {
		t.Fatalf("hook(T) = %q, %v", got, err)
	}
	if got, err := hook(ref); got != "" || err == nil || len(seen) != 1 || !strings.Contains(seen[0], "ResourceNotFoundException") {
		t.Fatalf("hook(missing secret) = %q, %v, errors seen %q", got, err, seen)
	}
}
