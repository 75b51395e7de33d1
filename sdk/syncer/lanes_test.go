package syncer

import (
	"encoding/json"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/ari"
	"github.com/fleetbucket/fleetbucket/sdk/connections"
	"github.com/fleetbucket/fleetbucket/sdk/job"
	"github.com/fleetbucket/fleetbucket/sdk/lane"
)

func TestFitItems(t *testing.T) {
	el := func(room, from, to string, seq int64) lane.Element {
		return lane.Element{RoomType: room, RatePlan: "BAR", From: from, To: to, Sequence: seq}
	}
	pending := []lane.Element{
		el("DBL", "2027-01-01", "2027-01-10", 1), // 10 items
		el("DBL", "2027-01-05", "2027-01-12", 2), // 2 new (11, 12)
		el("TWN", "2027-01-01", "2027-01-05", 3), // 5 new
		el("DBL", "2027-01-20", "2027-01-20", 4), // 1 new
	}
	tests := []struct {
		maxItems, want int
	}{
		{100, 4}, {18, 4}, {17, 3}, {12, 2}, {11, 1}, {1, 1}, // at least one element always goes
	}
	for _, tt := range tests {
		if got := fitItems(pending, tt.maxItems); len(got) != tt.want {
			t.Errorf("fitItems(max %d) = %d elements, want %d", tt.maxItems, len(got), tt.want)
		}
	}
}

func TestEncodePushSendsEachDateOnceFromState(t *testing.T) {
	id := lane.ID{Property: "hotel-1", Kind: "rates", Channel: "bk", Credential: "c", HotelRef: "BK-1"}
	els := []lane.Element{
		{RoomType: "DBL", RatePlan: "BAR", From: "2027-01-30", To: "2027-02-02", Sequence: 1},
		{RoomType: "DBL", RatePlan: "BAR", From: "2027-02-01", To: "2027-02-01", Sequence: 2},
	}
	cell := cellOf(id, els[0])
	state := map[string][]ari.Day{cell: {
		{Date: "2027-01-30", Sequence: 1, Values: json.RawMessage(`{"a":1}`)},
		{Date: "2027-01-31", Sequence: 1, Values: json.RawMessage(`{"a":1}`)},
		{Date: "2027-02-01", Sequence: 2, Values: json.RawMessage(`{"a":2}`)},
		{Date: "2027-02-02", Sequence: 1, Values: json.RawMessage(`{"a":1}`)},
		{Date: "2027-02-03", Sequence: 9, Values: json.RawMessage(`{"a":9}`)}, // not pending
	}}
	body, items, err := encodePush(id, els, state)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		HotelRef string `json:"hotel_ref"`
		Items    []struct {
			RoomType string `json:"room_type"`
			Days     []struct {
				Date     string `json:"date"`
				Sequence int64  `json:"sequence"`
			} `json:"days"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if items != 4 || got.HotelRef != "BK-1" || len(got.Items) != 1 || len(got.Items[0].Days) != 4 {
		t.Fatalf("push %s (%d items), want BK-1 with 4 dates of DBL", body, items)
	}
	if d := got.Items[0].Days[2]; d.Date != "2027-02-01" || d.Sequence != 2 {
		t.Fatalf("third date %+v, want 2027-02-01 at its newest sequence 2", d)
	}
}

func TestElementRoundTrip(t *testing.T) {
	for _, e := range []lane.Element{
		{RoomType: "DBL", RatePlan: "BAR", From: "2027-01-01", To: "2027-01-31", Sequence: 1 << 50},
		{RoomType: "STE", From: "2027-01-01", To: "2027-01-01", Sequence: 1},
	} {
		got, err := lane.ParseElement(e.String())
		if err != nil || got != e {
			t.Errorf("ParseElement(%q) = %+v, %v", e.String(), got, err)
		}
	}
	if _, err := lane.ParseElement("DBL#BAR#2027-01-01#x"); err == nil {
		t.Error("a short element parsed")
	}
}

func TestRefreshCredentialReportsARotation(t *testing.T) {
	cfg, err := connections.Parse([]byte(`{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":5,"burst":5}}},"credentials":{"c1":{"secret_id":"bk/c1"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{"secretsmanager:bk/c1": "old"}
	cache := map[string]string{}
	s := &Syncer{Config: cfg,
		Token: func(ref string) string {
			if _, ok := cache[ref]; !ok {
				cache[ref] = stored[ref]
			}
			return cache[ref]
		},
		Invalidate: func(ref string) { delete(cache, ref) },
	}
	j := job.Job{Channel: "bk", Credential: "c1", Endpoint: "rates"}
	if s.RefreshCredential(j) {
		t.Fatal("an unchanged secret was reported as rotated")
	}
	stored["secretsmanager:bk/c1"] = "new"
	if !s.RefreshCredential(j) || cache["secretsmanager:bk/c1"] != "new" {
		t.Fatalf("a rotated secret was not picked up (cache %v)", cache)
	}
	if (&Syncer{Config: cfg, Token: s.Token}).RefreshCredential(j) {
		t.Fatal("without Invalidate nothing can be refreshed")
	}
}
