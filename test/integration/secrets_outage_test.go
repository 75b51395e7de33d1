package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	secrets "github.com/fleetbucket/fleetbucket/sdk/pipeline/credentials"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// flakySecrets is the emulator's Secrets Manager behind an outage switch:
// while down, reads fail once the first allow of them have gone through.
type flakySecrets struct {
	*secretsmanager.Client
	down  atomic.Bool
	allow atomic.Int64
	// failed counts the reads the outage failed.
	failed atomic.Int64
}

var errSecretsDown = errors.New("injected: Secrets Manager unreachable")

func (f *flakySecrets) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, o ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	if f.down.Load() && f.allow.Add(-1) < 0 {
		f.failed.Add(1)
		return nil, errSecretsDown
	}
	return f.Client.GetSecretValue(ctx, in, o...)
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
			sm := emulator.SecretsManager(t)
			secret := emulator.NewSecret(t, sm, tt.stored)
			flaky := &flakySecrets{Client: sm}
			flaky.down.Store(true)
			flaky.allow.Store(tt.allow)
			cache := secrets.New(flaky)
			r := newLaneRig(t, lim, mockota.Config{Limit: lim, Credentials: []string{tt.accepted}}, secretConfig(lim, secret))
			r.linger = -1
			r.tuneSyncer = func(sy *syncer.Syncer) {
				sy.Credential, sy.Invalidate = cache.Lookup(5*time.Second, nil), cache.Invalidate
			}
			src := newPMS("hotel-aurora")
			for i := range 3 {
				day := time.Date(2027, 2, 1+i, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
				r.enqueueBodies([]string{src.change("rates", "DBL", day, day, i)})
			}

			r.feeding.Store(true)
			done := make(chan struct{})
			go func() { defer close(done); r.run(1, 2*time.Minute, 5*time.Second) }()
			if tt.rotated != "" {
				waitFor(t, "the OTA to refuse the old token", func() bool { return statusSeen(r, http.StatusUnauthorized) })
				if _, err := sm.PutSecretValue(context.Background(), &secretsmanager.PutSecretValueInput{SecretId: &secret, SecretString: &tt.rotated}); err != nil {
					t.Error(err)
				}
			}
			// The outage lasts for several store cooldowns (2 s each): a job
			// that is deferred keeps trying to read the token.
			waitFor(t, "the outage to fail four reads", func() bool { return flaky.failed.Load() >= 4 })
			time.Sleep(4 * time.Second)
			if dlq := r.receiveDLQ(); len(dlq) != 0 {
				t.Errorf("during the outage %d messages were dead-lettered: %v", len(dlq), reasons(dlq))
			}
			flaky.down.Store(false)
			r.feeding.Store(false)
			<-done

			src.assertNewest(t, otaCopy(t, r.pipeline), "BK-1001")
			if dlq := r.receiveDLQ(); len(dlq) != 0 {
				t.Errorf("after the outage %d messages were dead-lettered: %v", len(dlq), reasons(dlq))
			}
			for name, v := range laneItem(t, r, "hotel-aurora#rates") {
				if strings.HasPrefix(name, "d:") || strings.HasPrefix(name, "o:") {
					t.Errorf("the lane still holds %s = %v: want it released with nothing pending", name, v)
				}
			}
			t.Logf("%d reads failed during the outage; the OTA answered %d requests", flaky.failed.Load(), len(r.ota.Requests()))
		})
	}
}

// waitFor waits up to 20 s for cond, and reports it if cond never held;
// the test goes on, so that its pipeline still stops cleanly.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("waited 20 s for %s in vain", what)
			return
		}
	}
}

func statusSeen(r *laneRig, status int) bool {
	for _, req := range r.ota.Requests() {
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
