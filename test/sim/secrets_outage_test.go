package sim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	smcache "github.com/fleetbucket/fleetbucket/sdk/pipeline/credentials"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/dispatch"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// memSecrets is Secrets Manager in memory, behind an outage switch: while
// down, reads fail once the first allow of them have gone through.
type memSecrets struct {
	mu     sync.Mutex
	values map[string]string
	down   atomic.Bool
	allow  atomic.Int64
	// failed counts the reads the outage failed.
	failed atomic.Int64
}

var errSecretsDown = errors.New("injected: Secrets Manager unreachable")

func (m *memSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	if m.down.Load() && m.allow.Add(-1) < 0 {
		m.failed.Add(1)
		return nil, errSecretsDown
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.values[*in.SecretId]
	if !ok {
		return nil, fmt.Errorf("no secret %q", *in.SecretId)
	}
	return &secretsmanager.GetSecretValueOutput{Name: in.SecretId, SecretString: &v}, nil
}

func (m *memSecrets) put(id, value string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.values[id] = value
}

func secretConfig(lim limiter.Limit, secretID string) func(string) string {
	return func(url string) string {
		return fmt.Sprintf(`{
  "channels": {"booking_com": {"base_url": %q, "allow_http": true,
    "endpoints": {"rates": {"path": "/v1/rates", "limit": {"rate": %g, "burst": %d}}},
    "credentials": {"cred-1": {"secret_id": %q}}}},
  "properties": {"hotel-aurora": [{"channel": "booking_com", "credential": "cred-1", "hotel_ref": "BK-1001"}]}
}`, url, lim.Rate, lim.Burst, secretID)
	}
}

// A credential that cannot be read now (Secrets Manager down) is a store
// failure like any other: the lane's job is deferred, holding its lane,
// and pushes once the secret can be read again. Nothing is dead-lettered
// and nothing pending is cleared, whether the outage meets a cold cache
// (the job's route) or the refresh after a 401 that a rotation caused.
func TestSecretsOutageDefersAndLosesNothing(t *testing.T) {
	lim := limiter.PerSecond(10, 5)
	const secret = "fleetbucket/booking_com/cred-1"
	for _, tt := range []struct {
		name string
		// stored is the secret at the start, accepted the token the OTA
		// takes, rotated what the secret holds once the OTA refused it.
		stored, accepted, rotated string
		// allow is how many reads go through before the outage.
		allow int64
	}{
		{name: "cold cache", stored: "tok-1", accepted: "tok-1", allow: 0},
		{name: "refresh after a 401", stored: "old", accepted: "new", rotated: "new", allow: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sm := &memSecrets{values: map[string]string{secret: tt.stored}}
			sm.down.Store(true)
			sm.allow.Store(tt.allow)
			m := newMemLanes(t, mockota.Config{Limit: lim, Credentials: []string{tt.accepted}}, secretConfig(lim, secret),
				func(d *dispatch.Dispatcher) { d.Policy.StoreCooldown = 2 * time.Second })
			cache := smcache.New(sm, smcache.WithClock(m.clock.Now))
			m.sy.Credential, m.sy.Invalidate = cache.Lookup(5*time.Second, nil), cache.Invalidate
			src := newPMSOracle("hotel-aurora")
			for i := range 3 {
				day := time.Date(2027, 2, 1+i, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
				m.changes([]string{src.change("rates", "DBL", day, day, i)}, 1)
			}
			if tt.rotated != "" {
				if !statusSeen(m.ota, http.StatusUnauthorized) {
					t.Fatal("the OTA refused no token: the outage meets no refresh")
				}
				sm.put(secret, tt.rotated)
			}
			// The outage lasts for several store cooldowns (2 s each): a job
			// that is deferred keeps trying to read the token.
			for i := 0; sm.failed.Load() < 6; i++ {
				if i > 100 || len(m.pending) == 0 {
					t.Fatalf("%d reads failed after %d deliveries with %d jobs deferred, want the deferred job trying again", sm.failed.Load(), i, len(m.pending))
				}
				m.deliverNext()
			}
			if dlq := m.sent.deadLetters(deadURL); len(dlq) != 0 {
				t.Errorf("during the outage %d messages were dead-lettered: %v", len(dlq), reasons(dlq))
			}
			sm.down.Store(false)
			m.drain(100)

			src.assertNewest(t, m.ota, "BK-1001")
			if dlq := m.sent.deadLetters(deadURL); len(dlq) != 0 {
				t.Errorf("after the outage %d messages were dead-lettered: %v", len(dlq), reasons(dlq))
			}
			for name, v := range memLaneItem(t, m.store, "hotel-aurora#rates") {
				if strings.HasPrefix(name, "d:") || strings.HasPrefix(name, "o:") {
					t.Errorf("the lane still holds %s = %v: want it released with nothing pending", name, v)
				}
			}
			t.Logf("%d reads failed during the outage; the OTA answered %d requests", sm.failed.Load(), len(m.ota.Requests()))
		})
	}
}

func statusSeen(ota *mockota.Server, status int) bool {
	for _, req := range ota.Requests() {
		if req.Status == status {
			return true
		}
	}
	return false
}

// reasons lists a dead-letter queue's reasons, without the bodies.
func reasons(dlq map[string]string) []string {
	var out []string
	for _, reason := range dlq {
		out = append(out, reason)
	}
	return out
}
