package mockota

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// wireSend sends one request a format rendered, as the pipeline would, and
// returns how the format reads the mock's answer.
func wireSend(t *testing.T, s *Server, req format.Request, f format.Format, endpoint, job string) (int, format.Outcome) {
	t.Helper()
	hr, err := http.NewRequest(req.Method, s.URL()+"/v1/"+endpoint, bytes.NewReader(req.Body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range req.Header {
		hr.Header[k] = v
	}
	if job != "" {
		hr.Header.Set("X-Job-Id", job)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "text/xml" {
		t.Errorf("answer of type %q, want text/xml", ct)
	}
	return resp.StatusCode, f.Decode(req, format.Response{Status: resp.StatusCode, Header: resp.Header, Body: body, Received: t0})
}

func wireWork(rooms ...string) format.Work {
	w := format.Work{HotelRef: "H1", Kind: "availability", Secret: format.NewSecret("cm:pw")}
	for _, r := range rooms {
		w.Cells = append(w.Cells, format.Cell{RoomType: r, Days: []ari.Day{{Date: "2030-01-05", Sequence: 1, Values: []byte(`{"available":2}`)}}})
	}
	return w
}

func TestWireFormats(t *testing.T) {
	type step struct {
		name     string
		rooms    []string
		mangle   func([]byte) []byte
		noAuth   bool
		fail     int // FailNext status
		status   int
		verdict  format.Verdict
		refused  string // a room type the outcome names
		metered  bool
		accepted bool
	}
	tests := []struct {
		wire  string
		steps []step
	}{
		{WireOpenTravel, []step{
			{name: "mapped rooms", rooms: []string{"DBL", "SGL"}, status: 200, verdict: format.Accepted, metered: true, accepted: true},
			{name: "an unmapped room: 200 with Errors naming its part", rooms: []string{"DBL", "GHOST"}, status: 200, verdict: format.Refused, refused: "GHOST", metered: true},
			{name: "a wrong namespace: 400, not charged", rooms: []string{"DBL"}, mangle: func(b []byte) []byte { return bytes.Replace(b, []byte("2003/05"), []byte("2099/01"), 1) }, status: 400, verdict: format.Refused},
			{name: "no basic auth", rooms: []string{"DBL"}, noAuth: true, status: 401, verdict: format.Refused},
			{name: "an injected failure", rooms: []string{"DBL"}, fail: 503, status: 503, verdict: format.Transient, metered: true},
		}},
		{WireExpediaAR, []step{
			{name: "mapped rooms", rooms: []string{"DBL", "SGL"}, status: 200, verdict: format.Accepted, metered: true, accepted: true},
			{name: "an unmapped room: 200 with an Error, the whole message refused", rooms: []string{"DBL", "GHOST"}, status: 200, verdict: format.Refused, metered: true},
			{name: "a wrong namespace: 200 with an Error", rooms: []string{"DBL"}, mangle: func(b []byte) []byte { return bytes.Replace(b, []byte("2011/06"), []byte("2099/01"), 1) }, status: 200, verdict: format.Refused, metered: true},
			{name: "an injected failure", rooms: []string{"DBL"}, fail: 500, status: 500, verdict: format.Transient, metered: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.wire, func(t *testing.T) {
			s, _ := start(t, Config{Limit: gcra.Limit{Rate: 100, Burst: 100}, Enforce: EnforceNone, Wire: &Wire{Format: tt.wire, MappedRooms: []string{"DBL", "SGL"}}})
			f, _ := format.Lookup(tt.wire)
			for i, st := range tt.steps {
				job := "job-" + string(rune('a'+i))
				req, err := f.Encode(wireWork(st.rooms...))
				if err != nil {
					t.Fatal(err)
				}
				if st.mangle != nil {
					req.Body = st.mangle(req.Body)
				}
				if st.noAuth {
					req.Header.Del("Authorization")
				}
				if st.fail != 0 {
					s.FailNext(job, st.fail, 1)
				}
				status, o := wireSend(t, s, req, f, "availability", job)
				if status != st.status || o.Verdict != st.verdict {
					t.Errorf("%s: HTTP %d %v (%s), want HTTP %d %v", st.name, status, o.Verdict, o.Reason, st.status, st.verdict)
				}
				if st.refused != "" && (len(o.Refused) != 1 || o.Refused[0].RoomType != st.refused) {
					t.Errorf("%s: the outcome names %+v, want %s", st.name, o.Refused, st.refused)
				}
				rec := s.Requests()[i]
				if rec.Metered != st.metered || s.AcceptedByJob()[job] != boolN(st.accepted) || rec.Refused != (st.verdict == format.Refused && st.status == 200) {
					t.Errorf("%s: recorded metered %v refused %v, accepted %d", st.name, rec.Metered, rec.Refused, s.AcceptedByJob()[job])
				}
				if st.metered && rec.Credential != "cm" {
					t.Errorf("%s: metered under credential %q, want the username", st.name, rec.Credential)
				}
			}
			if n := len(s.Accepted()); n != 1 {
				t.Errorf("%d requests accepted, want 1", n)
			}
		})
	}
}

func boolN(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A throttled request is answered 429 with the format's error body, which
// the format reads as throttled, with the mock's Retry-After.
func TestWireThrottle(t *testing.T) {
	for _, wire := range []string{WireOpenTravel, WireExpediaAR} {
		t.Run(wire, func(t *testing.T) {
			s, _ := start(t, Config{Limit: gcra.Limit{Rate: 1, Burst: 1}, Wire: &Wire{Format: wire}})
			f, _ := format.Lookup(wire)
			req, _ := f.Encode(wireWork("DBL"))
			if status, o := wireSend(t, s, req, f, "availability", "j1"); status != 200 || o.Verdict != format.Accepted {
				t.Fatalf("first: HTTP %d %v %s", status, o.Verdict, o.Reason)
			}
			status, o := wireSend(t, s, req, f, "availability", "j2")
			if status != 429 || o.Verdict != format.Throttled || o.RetryAfter != time.Second {
				t.Fatalf("second: HTTP %d %+v, want throttled for 1s", status, o)
			}
			if got := s.Requests()[1].Body; !strings.Contains(string(got), "H1") {
				t.Fatalf("the recording lost the body")
			}
		})
	}
}

func TestWireConfig(t *testing.T) {
	if _, err := Start(Config{Limit: gcra.Limit{Rate: 1, Burst: 1}, Wire: &Wire{Format: "edifact"}}); err == nil || !strings.Contains(err.Error(), `Wire.Format "edifact"`) {
		t.Fatalf("Start = %v", err)
	}
}
