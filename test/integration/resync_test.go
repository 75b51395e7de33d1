package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetbucket/fleetbucket/cmd/fleetbucket/cli"
	"github.com/fleetbucket/fleetbucket/internal/contract"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/syncer"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
	"github.com/fleetbucket/fleetbucket/test/otacopy"
)

// newResyncRig is a connections rig whose OpenTravel mock OTA knows the
// room types DBL and SUI.
func newResyncRig(t *testing.T) *connRig {
	t.Helper()
	r := newWireRigWith(t, mockota.WireOpenTravel, func(c *mockota.Config) { c.Wire.MappedRooms = []string{"DBL", "SUI"} })
	db := emulator.DynamoDB(t)
	clock := newManualClock()
	store := &connections.Store{DB: db, Table: emulator.NewConnectionsTable(t, db), Config: r.sy.Config, Now: clock.Now}
	cache := &connections.Cache{Source: store, Config: r.sy.Config, Now: clock.Now}
	r.sy.Connections = cache
	return &connRig{wireRig: r, store: store, cache: cache, clock: clock, t0: clock.Now()}
}

// cli runs the fleetbucket CLI against the rig's tables and changes queue.
func (r *connRig) cli(t *testing.T, args ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "connections.json")
	cfg := fmt.Sprintf(`{"channels": {"ota": {"base_url": %q, "allow_http": true, "format": "opentravel",
  "endpoints": {"availability": {"path": "/v1/availability", "limit": {"rate": 50, "burst": 20}}},
  "credentials": {"cred-1": {"token_env": "TEST_OTA_LOGIN"}}}}}`, r.p.ota.URL())
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{contract.EnvConnectionsTable: r.store.Table, contract.EnvConnections: file, contract.EnvChangesQueueURL: r.p.changesURL}
	awsCfg := emulator.Config(t)
	var stdout, stderr bytes.Buffer
	app := &cli.App{Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return env[k] },
		AWSConfig:       func(context.Context) (aws.Config, error) { return awsCfg, nil },
		DynamoDBOptions: []func(*dynamodb.Options){emulator.ForEmulator}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if code := app.Main(ctx, args); code != 0 {
		t.Fatalf("fleetbucket %s: exit %d\n%s\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

// A change to a room type the connection does not map is dead-lettered;
// once the operator maps it (connections put), the cells the fix made new
// are pushed with their stored state, without a redrive and without a new
// change, and the cells the mapping already covered are not pushed again.
func TestMappingFixResyncsTheAffectedCells(t *testing.T) {
	r := newResyncRig(t)
	// The CLI resyncs a year from today: the change is for a date in it.
	day := time.Now().UTC().AddDate(0, 0, 3).Format("2006-01-02")
	r.put(t, connections.Connection{PropertyID: "hotel-aurora", Property: config.Property{Channel: "ota", Credential: "cred-1", HotelRef: "H-1001",
		RoomTypes: map[string]string{"SUI-PMS": "SUI"}, RatePlans: map[string]string{"BAR-PMS": "BAR"}}})
	out := r.handle(t,
		syncer.Message{ID: "1", Body: r.change(1, "hotel-aurora", "SUI-PMS", "BAR-PMS", "2026-12-01", 2)},
		syncer.Message{ID: "2", Body: r.change(2, "hotel-aurora", "DBL-PMS", "BAR-PMS", day, 4)})
	if n := len(r.p.ota.Requests()); n != 1 || out[1].Change.Invalid != "" {
		t.Fatalf("before the fix the vendor got %d requests, want 1 (the mapped SUI change); change 2: %+v", n, out[1].Change)
	}
	if letters := r.p.receiveDLQ(); len(letters) != 1 {
		t.Fatalf("dead letters %v, want the unmapped DBL-PMS change", letters)
	}

	said := r.cli(t, "connections", "put", "hotel-aurora", "ota", "--credential", "cred-1", "--hotel-ref", "H-1001",
		"--room-type", "SUI-PMS=SUI", "--room-type", "DBL-PMS=DBL", "--rate-plan", "BAR-PMS=BAR")
	if !strings.Contains(said, "DBL-PMS/BAR-PMS") {
		t.Errorf("the put did not say it resyncs DBL-PMS/BAR-PMS: %s", said)
	}
	r.at(connections.DefaultMaxAge) // every worker's cache has the fix
	bodies := r.p.receiveAll(r.p.changesURL, 1)
	res := r.handle(t, syncer.Message{ID: "3", Body: bodies[0]})
	if rs := res[0].Change.Resync; rs == nil || rs.Dates != 1 || rs.Cells != 1 {
		t.Fatalf("the resync event made %+v pending, want the one stored date of DBL-PMS/BAR-PMS", res[0].Change.Resync)
	}

	reqs := r.p.ota.Requests()
	if len(reqs) != 2 {
		t.Fatalf("after the fix the vendor got %d requests, want 2 (the resync's one push); results %+v", len(reqs), res[0].Jobs)
	}
	if body := string(reqs[1].Body); strings.Contains(body, "SUI") {
		t.Errorf("the resync pushed the SUI cell again, which the mapping already covered: %s", body)
	}
	held, ok := r.copy(t).Held(otacopy.Day{HotelRef: "H-1001", Kind: "availability", RoomType: "DBL", RatePlan: "BAR", Date: day})
	if !ok || !strings.Contains(held.Values, "4") {
		t.Fatalf("the OTA holds %+v (found %v) for DBL/BAR on %s, want the stored availability 4", held, ok, day)
	}
}
