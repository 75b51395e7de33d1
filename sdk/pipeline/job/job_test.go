package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func valid() Job {
	return Job{ID: "evt-1#booking_com#availability", Channel: "booking_com", Credential: "cred-1", Endpoint: "availability",
		Payload: []byte(`{"rooms":1}`), FirstSeen: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func TestRoundTrip(t *testing.T) {
	j := valid()
	j.Hold.At = j.FirstSeen.Add(3 * time.Second)
	j.Deadline = j.FirstSeen.Add(time.Hour)
	j.Deferrals, j.Items, j.Fit = 2, 7, 3
	body, err := Encode(j)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	j.V = Version
	if !got.Hold.At.Equal(j.Hold.At) || !got.Deadline.Equal(j.Deadline) || got.ID != j.ID || got.Deferrals != 2 || got.Items != 7 || got.Fit != 3 || string(got.Payload) != string(j.Payload) {
		t.Fatalf("round trip: got %+v, want %+v", got, j)
	}
	if strings.Contains(body, "not_before") {
		t.Errorf("zero NotBefore was encoded: %s", body)
	}
}

// Copies of one job share its Identity, whatever their trip through the
// queue changed; jobs that share only an ID do not.
func TestIdentity(t *testing.T) {
	j := valid()
	copies := map[string]func(Job) Job{
		"deferred with a slot": func(c Job) Job {
			c.Hold.At, c.Deferrals, c.Failures, c.Tries = c.FirstSeen.Add(time.Minute), 3, 1, 1
			return c
		},
		"re-encoded payload": func(c Job) Job { c.Payload = []byte(`{ "rooms" : 1 }`); return c },
		"restarted":          func(c Job) Job { return c.Restarted(c.FirstSeen.Add(time.Hour)) },
	}
	for name, f := range copies {
		if got := f(j).Identity(); got != j.Identity() {
			t.Errorf("%s: identity %q, want the original's %q", name, got, j.Identity())
		}
	}
	body, err := Encode(Job{ID: "e", Channel: "c", Credential: "k", Endpoint: "x", Payload: []byte(`{"a": "<b>"}`), FirstSeen: j.FirstSeen})
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := Decode(body)
	if err != nil {
		t.Fatal(err)
	}
	hand := Job{ID: "e", Channel: "c", Credential: "k", Endpoint: "x", Payload: []byte(`{"a": "<b>"}`)}
	if decoded.Identity() != hand.Identity() {
		t.Errorf("a hand-written payload and its encoded copy differ: %q, %q", hand.Identity(), decoded.Identity())
	}
	others := map[string]func(Job) Job{
		"another credential": func(c Job) Job { c.Credential = "cred-2"; return c },
		"another endpoint":   func(c Job) Job { c.Endpoint = "rates"; return c },
		"another channel":    func(c Job) Job { c.Channel = "expedia"; return c },
		"another payload":    func(c Job) Job { c.Payload = []byte(`{"rooms":2}`); return c },
		"another id":         func(c Job) Job { c.ID = "evt-2"; return c },
	}
	for name, f := range others {
		if got := f(j).Identity(); got == j.Identity() {
			t.Errorf("%s: identity %q, the same as the original's", name, got)
		}
	}
	if !strings.HasPrefix(j.Identity(), j.ID+"#") {
		t.Errorf("identity %q does not start with the job's ID, which logs and keys read", j.Identity())
	}
}

func TestDecodeRefusesMalformed(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"not JSON", `{"v":1,`, "unexpected end of JSON input"},
		{"two objects", `{"v":1,"id":"a","channel":"c","credential":"k","endpoint":"e","first_seen":"2026-11-30T12:00:00Z"}{}`, "after top-level value"},
		{"not an object", `[1]`, "cannot unmarshal array"},
		{"wrong version", `{"v":9,"id":"a","channel":"c","credential":"k","endpoint":"e","first_seen":"2026-11-30T12:00:00Z"}`, "version 9"},
		{"no version", `{"id":"a","channel":"c","credential":"k","endpoint":"e","first_seen":"2026-11-30T12:00:00Z"}`, "version 0"},
		{"a known field of the wrong type", `{"v":1,"id":"a","channel":"c","credential":"k","endpoint":"e","first_seen":"2026-11-30T12:00:00Z","deferrals":"two"}`, "deferrals of type int"},
		{"missing channel", `{"v":1,"id":"a","credential":"k","endpoint":"e","first_seen":"2026-11-30T12:00:00Z"}`, "channel is empty"},
		{"missing first_seen", `{"v":1,"id":"a","channel":"c","credential":"k","endpoint":"e"}`, "first_seen is missing"},
		{"separator in credential", `{"v":1,"id":"a","channel":"c","credential":"k#2","endpoint":"e","first_seen":"2026-11-30T12:00:00Z"}`, "credential contains"},
		{"bad slot", `{"v":1,"id":"a","channel":"c","credential":"k","endpoint":"e","first_seen":"2026-11-30T12:00:00Z","slot":"soon"}`, "cannot parse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.body)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Decode = %v, want ErrMalformed mentioning %q", err, tt.want)
			}
		})
	}
}

// In a rolling deploy, and in a rollback, a worker reads messages that a
// worker of another release wrote: the fields it does not know, added since
// as optional hints, are passed over, and what it knows reads as written.
func TestDecodePassesOverFieldsItDoesNotKnow(t *testing.T) {
	j := valid()
	j.Hold.At, j.Deferrals, j.Tries = j.FirstSeen.Add(3*time.Second), 2, 1
	body, err := Encode(j)
	if err != nil {
		t.Fatal(err)
	}
	for name, extra := range map[string]string{
		"a flag":    `"lease_first_v2":true`,
		"an object": `"hint":{"why":"busy","at":["2026-11-30T12:00:00Z"]}`,
		"a null":    `"route_hint":null`,
	} {
		t.Run(name, func(t *testing.T) {
			newer := strings.Replace(body, `"deferrals":`, extra+`,"deferrals":`, 1)
			if newer == body {
				t.Fatalf("no deferrals in %s", body)
			}
			got, err := Decode(newer)
			if err != nil {
				t.Fatalf("Decode(%s) = %v, want the job", newer, err)
			}
			if got.Identity() != j.Identity() || !got.Hold.At.Equal(j.Hold.At) || got.Deferrals != 2 || got.Tries != 1 {
				t.Fatalf("Decode(%s) = %+v, want %+v", newer, got, j)
			}
		})
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	j := valid()
	j.Endpoint = ""
	if _, err := Encode(j); err == nil || !strings.Contains(err.Error(), "endpoint is empty") {
		t.Fatalf("Encode = %v, want an error naming the endpoint", err)
	}
}

// A restarted job keeps what it is and starts its life over.
func TestRestarted(t *testing.T) {
	j := valid()
	j.Deadline = j.FirstSeen.Add(48 * time.Hour)
	j.Deferrals, j.Failures, j.Hold.Key = 200, 3, "k#1"
	j.Hold.At, j.NotBefore, j.DeferredAt, j.Due = j.FirstSeen.Add(time.Hour), j.FirstSeen.Add(2*time.Hour), j.FirstSeen, j.FirstSeen.Add(time.Minute)
	now := j.FirstSeen.Add(30 * time.Hour)
	got := j.Restarted(now)
	want := Job{ID: j.ID, Channel: j.Channel, Credential: j.Credential, Endpoint: j.Endpoint, Payload: j.Payload, FirstSeen: now, Deadline: j.Deadline}
	if got.ID != want.ID || string(got.Payload) != string(want.Payload) || !got.FirstSeen.Equal(now) || !got.Deadline.Equal(want.Deadline) ||
		got.Deferrals != 0 || got.Failures != 0 || got.Hold.Key != "" || !got.Hold.At.IsZero() || !got.NotBefore.IsZero() || !got.DeferredAt.IsZero() || !got.Due.IsZero() {
		t.Fatalf("Restarted = %+v, want %+v", got, want)
	}
	if j.Deferrals != 200 {
		t.Fatal("Restarted changed the job it was called on")
	}
}

// A body written before a job's hold was one value (its slot, key, tokens
// and stamp as five flat fields) is still in flight across a deployment:
// it decodes to the same hold, and a job encodes under the same names.
func TestDecodesABodyWrittenBeforeTheHold(t *testing.T) {
	const old = `{"v":1,"id":"evt-1#booking_com#availability","channel":"booking_com","credential":"cred-1","endpoint":"availability",` +
		`"payload":{"rooms":1},"first_seen":"2026-11-30T12:00:00Z","slot":"2026-11-30T12:00:03.25Z","slot_key":"k#s2","tokens":4,` +
		`"probe_version":7,"probe_interval_us":125000,"items":9,"deferrals":2}`
	got, err := Decode(old)
	if err != nil {
		t.Fatal(err)
	}
	want := Hold{At: time.Date(2026, 11, 30, 12, 0, 3, 250_000_000, time.UTC), Key: "k#s2", Tokens: 4, Grant: Grant{Version: 7, Interval: 125_000}}
	// Ahead: a slot on the queue was booked a queue's trip before it comes.
	if !got.Hold.At.Equal(want.At) || got.Hold.Key != want.Key || got.Hold.Tokens != want.Tokens || got.Hold.Grant != want.Grant || !got.Hold.Ahead || got.Items != 9 || got.Deferrals != 2 {
		t.Fatalf("decoded hold %+v (items %d, deferrals %d), want %+v (9, 2)", got.Hold, got.Items, got.Deferrals, want)
	}
	body, err := Encode(got)
	if err != nil {
		t.Fatal(err)
	}
	var was, is map[string]any
	if json.Unmarshal([]byte(old), &was) != nil || json.Unmarshal([]byte(body), &is) != nil || !reflect.DeepEqual(was, is) {
		t.Fatalf("re-encoded:\n%s\nwant the fields written before:\n%s", body, old)
	}
	got.Hold = Hold{}
	if body, _ := Encode(got); strings.Contains(body, "slot") || strings.Contains(body, "probe") || strings.Contains(body, "tokens") {
		t.Errorf("a job holding no slot encodes hold fields: %s", body)
	}
}

// A job keeps the newest MaxFenceTags tags, and its copies share none of
// their backing arrays.
func TestWithFenceTagKeepsTheNewest(t *testing.T) {
	tests := []struct {
		name string
		add  int
		want string
	}{
		{"one", 1, "[t1]"},
		{"up to the bound", 8, "[t1 t2 t3 t4 t5 t6 t7 t8]"},
		{"past it: the oldest go", 10, "[t3 t4 t5 t6 t7 t8 t9 t10]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var j Job
			for i := 1; i <= tt.add; i++ {
				j = j.WithFenceTag(fmt.Sprintf("t%d", i))
			}
			if got := fmt.Sprint(j.FenceTags); got != tt.want {
				t.Errorf("FenceTags %s, want %s", got, tt.want)
			}
		})
	}
	a := Job{}.WithFenceTag("a")
	b, c := a.WithFenceTag("b"), a.WithFenceTag("c")
	if fmt.Sprint(b.FenceTags, c.FenceTags) != "[a b] [a c]" {
		t.Errorf("two jobs grown from one share tags: %v %v", b.FenceTags, c.FenceTags)
	}
}
