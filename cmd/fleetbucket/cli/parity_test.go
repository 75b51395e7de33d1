package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/test/emulator"
	"github.com/fleetbucket/fleetbucket/test/mockota"
)

// parity prints the drift of a hotel, writes its EMF line to stderr and
// sends one repair change per run of drifted dates to the changes queue;
// --no-repair sends none.
func TestParityCommand(t *testing.T) {
	ota, err := mockota.Start(mockota.Config{Limit: gcra.Limit{Rate: 50, Burst: 20}, Wire: &mockota.Wire{Format: mockota.WireExpediaAR}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ota.Close)
	file := filepath.Join(t.TempDir(), "connections.json")
	if err := os.WriteFile(file, fmt.Appendf(nil, `{"channels": {"ota": {
  "base_url": %q, "allow_http": true, "format": "expedia-ar",
  "endpoints": {"availability": {"path": "/v1/availability", "limit": {"rate": 50, "burst": 20}}},
  "read": {"path": "/v1/read", "limit": {"rate": 5, "burst": 2}},
  "credentials": {"cred-1": {"token_env": "OTA_LOGIN"}}}},
  "properties": {"hotel-aurora": [{"channel": "ota", "credential": "cred-1", "hotel_ref": "H-1"}]}}`, ota.URL()), 0o600); err != nil {
		t.Fatal(err)
	}
	db := emulator.DynamoDB(t)
	state := &ari.Store{DB: db, Table: stateTable(t, db)}
	if _, err := state.Apply(context.Background(), ari.Change{EventID: "ev-3", PropertyID: "hotel-aurora", Sequence: 3, Kind: "availability",
		RoomType: "DBL", From: "2027-01-10", To: "2027-01-12", Values: map[string]any{"available": 5}}); err != nil {
		t.Fatal(err)
	}
	ota.Edit("H-1", "DBL", "", "2027-01-10", map[string]any{"available": 5})
	ota.Edit("H-1", "DBL", "", "2027-01-11", map[string]any{"available": 9})
	q := emulator.SQS(t)
	changes := emulator.NewQueue(t, q, "changes")
	limiterTable := emulator.NewTable(t, db)
	c := newCLI(t, map[string]string{"FLEETBUCKET_STATE_TABLE": state.Table, "FLEETBUCKET_TABLE": limiterTable,
		"FLEETBUCKET_CHANGES_QUEUE_URL": changes, "FLEETBUCKET_CONNECTIONS": file, "OTA_LOGIN": "cm:pw"})

	r := c.run("parity", "hotel-aurora", "ota", "--from", "2027-01-10", "--to", "2027-01-12")
	out := r.must(t)
	for _, w := range []string{"parity hotel-aurora/ota (hotel H-1) 2027-01-10..2027-01-12: 1 reads (0 throttled), 3 dates compared, 2 drifted, 1 repair changes sent",
		`drifted availability DBL  2027-01-11: [available] stored {"available":5} (sequence 3), the OTA holds {"available":9}`,
		`drifted availability DBL  2027-01-12: [available] stored {"available":5} (sequence 3), the OTA holds nothing`} {
		if !strings.Contains(out, w) {
			t.Errorf("stdout lacks %q:\n%s", w, out)
		}
	}
	if !strings.Contains(r.stderr, `"ParityDrift":2`) {
		t.Errorf("stderr has no EMF line counting 2 drifted dates: %s", r.stderr)
	}
	msgs, err := q.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &changes, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs.Messages) != 1 {
		t.Fatalf("%d repair messages on the changes queue, want 1", len(msgs.Messages))
	}
	ch, err := ari.Parse(aws.ToString(msgs.Messages[0].Body), 31)
	if err != nil {
		t.Fatalf("the repair is no change the sync function takes: %v", err)
	}
	if ch.From != "2027-01-11" || ch.To != "2027-01-12" || ch.Sequence != 3 || ch.RoomType != "DBL" || ch.Values["available"] != 5.0 {
		t.Errorf("repair = %+v, want DBL 2027-01-11..12 at sequence 3 with the stored values", ch)
	}

	r = c.run("parity", "hotel-aurora", "ota", "--from", "2027-01-10", "--to", "2027-01-12", "--no-repair", "--changes-queue-url", "")
	if out := r.must(t); !strings.Contains(out, "2 drifted, 0 repair changes sent") {
		t.Errorf("--no-repair: %s", out)
	}
	c.run("parity", "hotel-aurora", "nope").fails(t, `property "hotel-aurora" has no connection to channel "nope"`)
	c.run("parity", "hotel-aurora", "ota", "--from", "2027-02-01", "--to", "2027-01-01").fails(t, "not before --from")
}
