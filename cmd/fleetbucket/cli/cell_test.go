package cli

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

func stateTable(t *testing.T, db *dynamodb.Client) string {
	t.Helper()
	name := fmt.Sprintf("cli-state-%08x", rand.Uint32())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ari.CreateTable(ctx, db, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
	return name
}

func change(seq int64, from, to string, amount string) ari.Change {
	return ari.Change{EventID: fmt.Sprintf("ev-%d", seq), PropertyID: "h1", Sequence: seq, Kind: "rates",
		RoomType: "std", RatePlan: "bar", From: from, To: to, Values: map[string]any{"amount": amount}}
}

type cellOut struct {
	Cell  string    `json:"cell"`
	Month string    `json:"month"`
	Days  []ari.Day `json:"days"`
}

// A runaway sequence freezes its days; reset-sequence unfreezes one day,
// and only with --yes: sdk/pipeline/ari's own Apply then writes it again.
func TestCellShowAndResetSequence(t *testing.T) {
	db := emulator.DynamoDB(t)
	store := &ari.Store{DB: db, Table: stateTable(t, db)}
	ctx := context.Background()
	if _, err := store.Apply(ctx, change(7, "2027-01-30", "2027-02-01", "120")); err != nil {
		t.Fatal(err)
	}
	// A runaway sequence from before ari refused them.
	if _, err := store.Apply(ctx, change(math.MaxInt64, "2027-01-04", "2027-01-06", "1")); err != nil {
		t.Fatal(err)
	}
	c := newCLI(t, map[string]string{"FLEETBUCKET_STATE_TABLE": store.Table})
	cell := []string{"h1", "rates", "std", "bar"}
	show := func(t *testing.T) map[string]int64 {
		out := decode[cellOut](t, c.run(append([]string{"cell", "show", "--month", "2027-01", "--json"}, cell...)...).must(t))
		if out.Cell != "h1#rates#std#bar" || out.Month != "2027-01" {
			t.Errorf("show = %+v", out)
		}
		seqs := map[string]int64{}
		for _, d := range out.Days {
			seqs[d.Date] = d.Sequence
		}
		return seqs
	}
	runaway := int64(math.MaxInt64)
	if got := show(t); len(got) != 5 || got["2027-01-05"] != runaway || got["2027-01-31"] != 7 || got["2027-02-01"] != 0 {
		t.Fatalf("show = %v, want 04..06 at 2^63-1 and 30..31 at 7 (February is another month)", got)
	}
	text := c.run(append([]string{"cell", "show", "--month", "2027-01"}, cell...)...).must(t)
	for _, w := range []string{"cell h1#rates#std#bar, 2027-01: 5 day(s) with state", `2027-01-05  sequence 9223372036854775807  {"amount":"1"}`} {
		if !strings.Contains(text, w) {
			t.Errorf("show text lacks %q:\n%s", w, text)
		}
	}
	if out := c.run("cell", "show", "h1", "rates", "std", "--month", "2027-01").must(t); !strings.Contains(out, "h1#rates#std#, 2027-01: 0 day(s)") {
		t.Errorf("no rate plan is another cell: %s", out)
	}

	reset := func(args ...string) result {
		return c.run(append(append([]string{"cell", "reset-sequence"}, cell...), args...)...)
	}
	tests := []struct {
		name string
		args []string
		want string // in stderr when it fails; in stdout otherwise
		fail bool
		seq  int64 // of 2027-01-05 after
	}{
		{"without --yes nothing changes", []string{"--date", "2027-01-05"}, "not changed: 2027-01-05 of cell h1#rates#std#bar holds sequence 9223372036854775807; run again with --yes to set it to 0", true, runaway},
		{"not back", []string{"--date", "2027-01-05", "--to", "9007199254740992", "--yes"}, "", false, 9007199254740992},
		{"not forward", []string{"--date", "2027-01-05", "--to", "9007199254740992", "--yes"}, "--to 9007199254740992 would not set it back", true, 9007199254740992},
		{"a day without state", []string{"--date", "2027-01-10", "--yes"}, "2027-01-10 of cell h1#rates#std#bar holds no state: nothing to reset", true, 9007199254740992},
		{"bad date", []string{"--date", "2027-1-5", "--yes"}, `date "2027-1-5": want YYYY-MM-DD`, true, 9007199254740992},
		{"to zero", []string{"--date", "2027-01-05", "--yes"}, "2027-01-05 of cell h1#rates#std#bar: sequence 9007199254740992 → 0", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			r := reset(tt.args...)
			if tt.fail {
				r.fails(t, tt.want)
			} else if out := r.must(t); !strings.Contains(out, tt.want) {
				t.Errorf("stdout lacks %q: %s", tt.want, out)
			}
			if got := show(t)["2027-01-05"]; got != tt.seq {
				t.Errorf("2027-01-05 holds sequence %d, want %d", got, tt.seq)
			}
		})
	}
	c.t = t

	// The next change writes the reset day and no other frozen one.
	a, err := store.Apply(ctx, change(8, "2027-01-04", "2027-01-06", "130"))
	if err != nil {
		t.Fatal(err)
	}
	days, err := store.Read(ctx, []ari.Range{{Cell: "h1#rates#std#bar", From: "2027-01-04", To: "2027-01-06"}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range days["h1#rates#std#bar"] {
		got = append(got, fmt.Sprintf("%s %d %s", d.Date, d.Sequence, d.Values))
	}
	want := []string{`2027-01-04 9223372036854775807 {"amount":"1"}`, `2027-01-05 8 {"amount":"130"}`, `2027-01-06 9223372036854775807 {"amount":"1"}`}
	// Current, not Changed: an SDK retry after a lost answer finds the day
	// already written by its first attempt, and counts it as current.
	if a.Current != 1 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("after the reset a change holds %d day(s): %q; want only 2027-01-05: %q", a.Current, got, want)
	}

	c.run(append([]string{"cell", "show", "--month", "2027-01", "--state-table", "no-such-table"}, cell...)...).fails(t, `state table "no-such-table" not found`)
	c.run(append([]string{"cell", "show", "--month", "January"}, cell...)...).fails(t, `month "January": want YYYY-MM`)
}
