package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// resync plans from the stored state (a cell without state is listed, not
// sent) and sends one resync event to the changes queue.
func TestResyncCommandPlansAndSends(t *testing.T) {
	cfg := emulator.Config(t)
	db := dynamodb.NewFromConfig(cfg, emulator.ForEmulator)
	state := emulator.NewStateTable(t, db)
	q := emulator.SQS(t)
	changes := emulator.NewQueue(t, q, "changes")
	store := &ari.Store{DB: db, Table: state}
	if _, err := store.Apply(context.Background(), ari.Change{EventID: "e1", PropertyID: "h1", Sequence: 1, Kind: "availability",
		RoomType: "DBL", RatePlan: "BAR", From: "2027-01-01", To: "2027-01-10", Values: map[string]any{"available": 2}}); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "connections.json", goodConfig)
	c := newCLI(t, map[string]string{"FLEETBUCKET_CONNECTIONS": file, "FLEETBUCKET_STATE_TABLE": state, "FLEETBUCKET_CHANGES_QUEUE_URL": changes})

	c.run("resync", "h1", "--kinds", "availability", "--from", "2027-01-01", "--to", "2027-01-31").fails(t, "maps no room types: name the cells")
	out := c.run("resync", "h1", "--kinds", "availability", "--from", "2027-01-01", "--to", "2027-01-31", "--cells", "DBL/BAR,SUI/BAR").must(t)
	for _, want := range []string{"h1#availability#bk#c1#R1  1 cells, 10 dates", "no state for SUI/BAR (not sent)"} {
		if !strings.Contains(out, want) {
			t.Fatalf("resync printed %q, want %q in it", out, want)
		}
	}
	got, err := q.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &changes, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 1 {
		t.Fatalf("%d messages on the changes queue, want the resync event", len(got.Messages))
	}
	r, err := ari.ParseResync(aws.ToString(got.Messages[0].Body))
	if err != nil || r.PropertyID != "h1" || r.From != "2027-01-01" || len(r.Cells) != 2 || !r.Wants("availability") || r.Wants("rates") {
		t.Fatalf("the event is %+v (%v), want h1's availability resync of DBL/BAR and SUI/BAR from 2027-01-01", r, err)
	}
	c.run("resync", "h1", "--from", "2027-02-01", "--to", "2026-01-01").fails(t, "inverted")
}
