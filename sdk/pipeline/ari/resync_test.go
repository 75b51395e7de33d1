package ari

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestResyncEventRoundTripsAndIsValidated(t *testing.T) {
	r := Resync{ResyncID: "rs-1", PropertyID: "hotel-aurora", Channel: "ota", Kinds: []string{"rates"}, From: "2027-01-01", To: "2027-12-31",
		Cells: []ResyncCell{{RoomType: "DBL", RatePlan: "BAR", From: "2027-02-01", To: "2027-02-03"}}}
	body, err := r.Event(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if !IsResync(body) {
		t.Fatalf("IsResync(%s) = false", body)
	}
	got, err := ParseResync(body)
	if err != nil {
		t.Fatal(err)
	}
	if got.ResyncID != r.ResyncID || got.From != r.From || got.To != r.To || len(got.Cells) != 1 || got.Cells[0] != r.Cells[0] || !got.Wants("rates") || got.Wants("availability") {
		t.Fatalf("ParseResync = %+v, want %+v", got, r)
	}
	if _, err := Parse(body, 31); err == nil {
		t.Fatal("a resync event parsed as a change")
	}
	tests := []struct {
		name string
		body string
		want string
	}{
		{"inverted window", strings.Replace(body, `"from":"2027-01-01"`, `"from":"2028-01-01"`, 1), "inverted"},
		{"window too long", strings.Replace(body, `"to":"2027-12-31"`, `"to":"2029-12-31"`, 1), "more than the 760"},
		{"unknown kind", strings.Replace(body, `"rates"`, `"rate"`, 1), "unknown kind"},
		{"unknown field", strings.Replace(body, `"resync_id"`, `"extra":1,"resync_id"`, 1), "extra"},
		{"a change's detail-type", strings.Replace(body, `"detail-type":"resync"`, `"detail-type":"ARI change"`, 1), "not a resync"},
	}
	for _, tt := range tests {
		_, err := ParseResync(tt.body)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ParseResync error %v, want ErrInvalid naming %q", tt.name, err, tt.want)
		}
	}
}
