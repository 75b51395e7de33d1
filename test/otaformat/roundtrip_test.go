package otaformat_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
	"github.com/fleetbucket/fleetbucket/test/otaformat"
)

var secret = format.NewSecret("cm-user:pw&<\"x")

// gen makes work whose values each format can express, and what a vendor
// must end up holding from it.
type gen struct {
	r      *rand.Rand
	format string
}

func (g gen) pick(fields map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range fields {
		if g.r.IntN(2) == 0 {
			out[k] = v
		}
	}
	if len(out) == 0 {
		for k, v := range fields { // at least one, the map's first
			out[k] = v
			break
		}
	}
	return out
}

func (g gen) values(kind, plan string) map[string]any {
	ar := g.format == format.ExpediaAR
	switch kind {
	case "availability":
		if ar && plan != "" {
			return map[string]any{"closed": g.r.IntN(2) == 0}
		}
		return g.pick(map[string]any{"available": g.r.IntN(20), "closed": g.r.IntN(2) == 0})
	case "rates":
		v := map[string]any{"amount": fmt.Sprintf("%d.%02d", 50+g.r.IntN(200), g.r.IntN(100))}
		if ar || g.r.IntN(2) == 0 {
			v["currency"] = []string{"EUR", "USD"}[g.r.IntN(2)]
		}
		if !ar && g.r.IntN(2) == 0 {
			v["guests"] = 1 + g.r.IntN(4)
		}
		return v
	}
	minLOS := 1 + g.r.IntN(3)
	v := g.pick(map[string]any{"min_los": minLOS, "max_los": minLOS + g.r.IntN(10), "closed": g.r.IntN(2) == 0,
		"closed_to_arrival": g.r.IntN(2) == 0, "closed_to_departure": g.r.IntN(2) == 0})
	if _, ok := v["min_los"]; ok {
		v["max_los"] = minLOS + g.r.IntN(10)
	}
	return v
}

func (g gen) work(kind string) (format.Work, map[otaformat.Key]map[string]any) {
	w := format.Work{HotelRef: fmt.Sprintf("H%d", g.r.IntN(1000)), Kind: kind, Secret: secret}
	want := map[otaformat.Key]map[string]any{}
	rooms := []string{"DBL", "SGL", "TWN", "STE"}[:1+g.r.IntN(4)]
	plans := []string{"", "BAR", "NR"}
	for _, room := range rooms {
		for _, plan := range plans[g.r.IntN(2):] {
			if plan == "" && (kind == "rates" || kind == "restrictions" && g.format == format.ExpediaAR) {
				continue
			}
			if g.r.IntN(3) == 0 {
				continue
			}
			c := format.Cell{RoomType: room, RatePlan: plan}
			d := time.Date(2027, time.Month(1+g.r.IntN(12)), 1+g.r.IntN(28), 0, 0, 0, 0, time.UTC)
			var v map[string]any
			for range 1 + g.r.IntN(70) {
				if v == nil || g.r.IntN(10) < 3 {
					v = g.values(kind, plan)
				}
				raw, _ := json.Marshal(v)
				date := d.Format("2006-01-02")
				c.Days = append(c.Days, ari.Day{Date: date, Sequence: 1, Values: raw})
				want[otaformat.Key{Hotel: w.HotelRef, Kind: kind, RoomType: room, RatePlan: plan, Date: date}] = v
				d = d.AddDate(0, 0, 1+boolInt(g.r.IntN(8) == 0)) // now and then a gap
			}
			w.Cells = append(w.Cells, c)
		}
	}
	return w, want
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Encode with sdk/pipeline/format, decode with the independent decoder:
// the vendor ends up with exactly the input, every (hotel, room type, rate
// plan, date) once, in requests the vendor accepts (one month each for
// OpenTravel, at most 5,000 updates for Expedia AR).
func TestRoundTrip(t *testing.T) {
	decoders := map[string]func([]byte, string, otaformat.Rules) (otaformat.Message, error){
		format.OpenTravel: otaformat.DecodeOpenTravel,
		format.ExpediaAR:  otaformat.DecodeExpediaAR,
	}
	for name, decode := range decoders {
		t.Run(name, func(t *testing.T) {
			f, _ := format.Lookup(name)
			g := gen{r: rand.New(rand.NewPCG(19, uint64(len(name)))), format: name}
			requests := 0
			for i := range 200 {
				kind := ari.Kinds[i%3]
				w, want := g.work(kind)
				shape := format.Shape{}
				if g.r.IntN(2) == 0 {
					shape.MaxItems = 5 + g.r.IntN(60)
				}
				reqs, err := format.Encode(f, w, shape)
				if err != nil {
					t.Fatalf("case %d: %v", i, err)
				}
				got := map[otaformat.Key]map[string]any{}
				for _, r := range reqs {
					m, err := decode(r.Body, kind, otaformat.Rules{})
					if err != nil {
						t.Fatalf("case %d: the vendor refuses: %v\n%s", i, err, r.Body)
					}
					if name == format.ExpediaAR && (m.User != "cm-user" || m.Password != "pw&<\"x") {
						t.Fatalf("case %d: credential %q", i, m.User)
					}
					for k, v := range m.Values {
						if _, dup := got[k]; dup {
							t.Fatalf("case %d: %v sent twice", i, k)
						}
						got[k] = v
					}
				}
				requests += len(reqs)
				if !reflect.DeepEqual(got, want) {
					for k, v := range want {
						if !reflect.DeepEqual(got[k], v) {
							t.Fatalf("case %d: %v: got %v, want %v", i, k, got[k], v)
						}
					}
					t.Fatalf("case %d: %d keys, want %d", i, len(got), len(want))
				}
			}
			t.Logf("%d requests for 200 pushes", requests)
		})
	}
}

// What each vendor refuses, and how the format reads the refusal.
func TestVendorRefuses(t *testing.T) {
	ot, _ := format.Lookup(format.OpenTravel)
	ar, _ := format.Lookup(format.ExpediaAR)
	day := func(date, v string) ari.Day { return ari.Day{Date: date, Sequence: 1, Values: []byte(v)} }
	avail := format.Work{HotelRef: "H1", Kind: "availability", Secret: secret, Cells: []format.Cell{
		{RoomType: "DBL", Days: []ari.Day{day("2027-03-30", `{"available":1}`), day("2027-03-31", `{"available":1}`)}},
		{RoomType: "GHOST", Days: []ari.Day{day("2027-03-31", `{"closed":true}`)}},
	}}
	twoMonths := avail
	twoMonths.Cells = []format.Cell{{RoomType: "DBL", Days: []ari.Day{day("2027-03-31", `{"available":1}`), day("2027-04-01", `{"available":1}`)}}}
	body := func(f format.Format, w format.Work, s format.Shape) []byte {
		reqs, err := format.Encode(f, w, s)
		if err != nil || len(reqs) != 1 {
			t.Fatalf("Encode: %d requests, %v", len(reqs), err)
		}
		return reqs[0].Body
	}
	mapped := otaformat.Rules{MappedRooms: map[string]bool{"DBL": true}}
	var big strings.Builder
	fmt.Fprintf(&big, `<AvailRateUpdateRQ xmlns="%s"><Authentication username="u" password="p"/><Hotel id="H1"/>`, otaformat.ExpediaARNS)
	for i := range 2 {
		fmt.Fprintf(&big, `<AvailRateUpdate><DateRange from="2027-01-01" to="2033-11-05"/><RoomType id="R%d"><Inventory totalInventoryAvailable="1"/></RoomType></AvailRateUpdate>`, i)
	}
	big.WriteString(`</AvailRateUpdateRQ>`)
	tests := []struct {
		name   string
		decode func() error
		want   string
	}{
		{"opentravel: wrong namespace", func() error {
			_, err := otaformat.DecodeOpenTravel([]byte(strings.Replace(string(body(ot, avail, format.Shape{})), "OTA/2003/05", "OTA/2004/01", 1)), "availability", otaformat.Rules{})
			return err
		}, "HTTP 400, INVALID_NAMESPACE"},
		{"opentravel: missing hotel", func() error {
			_, err := otaformat.DecodeOpenTravel([]byte(strings.Replace(string(body(ot, avail, format.Shape{})), `HotelCode="H1"`, `HotelCode=""`, 1)), "availability", otaformat.Rules{})
			return err
		}, "HTTP 400, HOTEL_ID_MISSING"},
		{"opentravel: two months in one request", func() error {
			_, err := otaformat.DecodeOpenTravel(body(ot, twoMonths, format.Shape{SplitBy: format.SplitNone}), "availability", otaformat.Rules{})
			return err
		}, "HTTP 400, MORE_THAN_ONE_MONTH"},
		{"opentravel: unmapped room type", func() error {
			_, err := otaformat.DecodeOpenTravel(body(ot, avail, format.Shape{}), "availability", mapped)
			return err
		}, "HTTP 200, 402: Room ID is not valid for this hotel (records 2)"},
		{"expedia-ar: wrong namespace", func() error {
			_, err := otaformat.DecodeExpediaAR([]byte(strings.Replace(string(body(ar, avail, format.Shape{})), "AR/2011/06", "AR/2009/01", 1)), "availability", otaformat.Rules{})
			return err
		}, "HTTP 200, 2010"},
		{"expedia-ar: missing hotel", func() error {
			_, err := otaformat.DecodeExpediaAR([]byte(strings.Replace(string(body(ar, avail, format.Shape{})), `<Hotel id="H1">`, `<Hotel id="">`, 1)), "availability", otaformat.Rules{})
			return err
		}, "HTTP 200, 3015"},
		{"expedia-ar: over 5,000 updates", func() error {
			_, err := otaformat.DecodeExpediaAR([]byte(big.String()), "availability", otaformat.Rules{})
			return err
		}, "HTTP 200, 3103: 5002 updates in one message, more than 5000"},
		{"expedia-ar: unmapped room type", func() error {
			_, err := otaformat.DecodeExpediaAR(body(ar, avail, format.Shape{}), "availability", mapped)
			return err
		}, "HTTP 200, 3202: Room type GHOST is not mapped to hotel H1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode()
			var r *otaformat.Refusal
			if !errors.As(err, &r) || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("decode = %v, want a refusal %q", err, tt.want)
			}
		})
	}

	// The vendors' answers, read by the formats: OpenTravel names the
	// unmapped room's part, Expedia refuses the whole message in a 200.
	req, _ := ot.Encode(avail)
	_, err := otaformat.DecodeOpenTravel(req.Body, "availability", mapped)
	var r *otaformat.Refusal
	errors.As(err, &r)
	o := ot.Decode(req, format.Response{Status: r.Status, Body: otaformat.AnswerOpenTravel("availability", r)})
	if o.Verdict != format.Refused || len(o.Refused) != 1 || o.Refused[0].RoomType != "GHOST" || !o.Names("GHOST", "", "2027-03-31", "2027-03-31") || o.Names("DBL", "", "2027-03-30", "2027-03-31") {
		t.Fatalf("opentravel reads the refusal as %+v", o)
	}
	req, _ = ar.Encode(avail)
	_, err = otaformat.DecodeExpediaAR(req.Body, "availability", mapped)
	errors.As(err, &r)
	o = ar.Decode(req, format.Response{Status: r.Status, Body: otaformat.AnswerExpediaAR(r)})
	if o.Verdict != format.Refused || o.Refused != nil || !strings.Contains(o.Reason, "3202") {
		t.Fatalf("expedia-ar reads the refusal as %+v", o)
	}
	for name, answer := range map[string][]byte{format.OpenTravel: otaformat.AnswerOpenTravel("rates", nil, "rate below threshold"), format.ExpediaAR: otaformat.AnswerExpediaAR(nil, "rate below threshold")} {
		f, _ := format.Lookup(name)
		if o := f.Decode(format.Request{}, format.Response{Status: 200, Body: answer}); o.Verdict != format.AcceptedWithWarnings || len(o.Warnings) != 1 {
			t.Errorf("%s reads warnings as %+v", name, o)
		}
	}
}
