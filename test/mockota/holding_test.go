package mockota

import (
	"bytes"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// readHeld reads what the vendor holds of H1 over the window with a
// ProductAvailRateRetrievalRQ, as a parity check does.
func readHeld(t *testing.T, s *Server, from, to string) (int, format.Holding, format.Outcome) {
	t.Helper()
	r, err := format.ReaderOf(format.ExpediaAR)
	if err != nil {
		t.Fatal(err)
	}
	q := format.ReadQuery{HotelRef: "H1", From: from, To: to, Secret: format.NewSecret("cm:pw")}
	req, err := r.EncodeRead(q)
	if err != nil {
		t.Fatal(err)
	}
	hr, _ := http.NewRequest(http.MethodPost, s.URL()+"/v1/read", bytes.NewReader(req.Body))
	hr.Header.Set("X-Job-Id", "read-1")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	h, o := r.DecodeRead(q, format.Response{Status: resp.StatusCode, Header: resp.Header, Body: body})
	return resp.StatusCode, h, o
}

// An expedia-ar vendor answers a read from its own copy: what the pushes
// it applied left, changed by a hand edit (POST /admin/edit), and nothing
// it refused. A read is metered on its endpoint and never counts as
// applied.
func TestWireVendorAnswersAReadFromItsCopy(t *testing.T) {
	s, _ := start(t, Config{Limit: gcra.Limit{Rate: 100, Burst: 100}, Enforce: EnforceNone,
		Wire: &Wire{Format: WireExpediaAR, MappedRooms: []string{"DBL", "SGL"}}})
	f, _ := format.Lookup(format.ExpediaAR)
	push := func(job string, rooms ...string) {
		req, err := f.Encode(wireWork(rooms...))
		if err != nil {
			t.Fatal(err)
		}
		wireSend(t, s, req, f, "availability", job)
	}
	push("job-a", "DBL", "SGL")
	push("job-b", "GHOST") // refused: nothing held
	edit := `{"hotel":"H1","room_type":"DBL","date":"2030-01-05","values":{"available":9}}`
	resp, err := http.Post(s.URL()+"/admin/edit", "application/json", strings.NewReader(edit))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST /admin/edit: HTTP %d, want 204", resp.StatusCode)
	}
	if got := s.Holds("H1", "DBL", "", "2030-01-05"); !reflect.DeepEqual(got, map[string]any{"available": 9}) {
		t.Errorf("Holds DBL = %v, want the edit's available 9", got)
	}
	status, h, o := readHeld(t, s, "2030-01-01", "2030-01-31")
	if status != 200 || o.Verdict != format.Accepted {
		t.Fatalf("read: HTTP %d %v %s", status, o.Verdict, o.Reason)
	}
	want := map[string]int{"DBL": 9, "SGL": 2}
	if len(h) != len(want) {
		t.Errorf("read holds %d cells, want %d: %v", len(h), len(want), h)
	}
	for room, n := range want {
		v := h[format.HeldCell{Kind: "availability", RoomType: room}]["2030-01-05"]
		if v.Available == nil || *v.Available != n {
			t.Errorf("read: %s on 2030-01-05 holds %+v, want available %d", room, v, n)
		}
	}
	if _, h, _ := readHeld(t, s, "2030-02-01", "2030-02-28"); len(h) != 0 {
		t.Errorf("read of a window with nothing held: %v", h)
	}
	last := s.Requests()[len(s.Requests())-1]
	if !last.Read || !last.Metered || last.Endpoint != "read" || last.Credential != "cm" {
		t.Errorf("the read was recorded as %+v, want a metered read of cm on endpoint read", last)
	}
	if n := len(s.Accepted()); n != 1 {
		t.Errorf("%d requests applied, want 1 (reads apply nothing)", n)
	}
}
