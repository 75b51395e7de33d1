package format

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
)

// run is consecutive dates of one cell with equal values: one range in a
// message (StatusApplicationControl Start/End, DateRange from/to).
type run struct {
	cell     int
	from, to string
	values   Values
}

// runs parses every day of w's cells and merges consecutive dates with
// equal values, cells in order, each cell's runs in date order.
func runs(name string, w Work) ([]run, error) {
	var out []run
	for i, c := range w.Cells {
		kind := w.kindOf(c)
		var cur *run
		var prev time.Time
		for _, d := range c.Days {
			v, err := ParseValues(kind, d.Values)
			if err != nil {
				return nil, &UnexpressibleError{Format: name, Kind: kind, RoomType: c.RoomType, RatePlan: c.RatePlan, Date: d.Date, Reason: err.Error()}
			}
			t, err := time.Parse(ari.DateLayout, d.Date)
			if err != nil {
				return nil, &UnexpressibleError{Format: name, Kind: kind, RoomType: c.RoomType, RatePlan: c.RatePlan, Date: d.Date, Reason: "not a date (YYYY-MM-DD)"}
			}
			if cur != nil && t.Equal(prev.AddDate(0, 0, 1)) && cur.values.key() == v.key() {
				cur.to = d.Date
			} else {
				out = append(out, run{cell: i, from: d.Date, to: d.Date, values: v})
				cur = &out[len(out)-1]
			}
			prev = t
		}
	}
	return out, nil
}

// unexpressible is the error for run r of w.
func unexpressible(name string, w Work, r run, reason string) error {
	c := w.Cells[r.cell]
	return &UnexpressibleError{Format: name, Kind: w.kindOf(c), RoomType: c.RoomType, RatePlan: c.RatePlan, Date: r.from, Reason: reason}
}

// marshalXML renders v with the XML declaration, and an echo token (the
// first 16 hex digits of the SHA-256 of the body without one) set by
// setEcho: the same message retried carries the same token, two different
// messages never do.
func marshalXML(v any, setEcho func(string)) ([]byte, error) {
	body, err := xml.Marshal(v)
	if err != nil {
		return nil, err
	}
	if setEcho != nil {
		sum := sha256.Sum256(body)
		setEcho(hex.EncodeToString(sum[:8]))
		if body, err = xml.Marshal(v); err != nil {
			return nil, err
		}
	}
	return append([]byte(xml.Header), body...), nil
}

// issue is one <Error> or <Warning> of an answer, OpenTravel's attributes
// and Expedia's alike.
type issue struct {
	Code      string `xml:"Code,attr"`
	LowerCode string `xml:"code,attr"`
	Type      string `xml:"Type,attr"`
	ShortText string `xml:"ShortText,attr"`
	RecordID  string `xml:"RecordID,attr"`
	Text      string `xml:",chardata"`
}

func (i issue) code() string {
	if i.Code != "" {
		return i.Code
	}
	return i.LowerCode
}

func (i issue) String() string {
	text := strings.TrimSpace(i.ShortText)
	if t := strings.TrimSpace(i.Text); text == "" || t != "" && t != text {
		text = strings.TrimSpace(text + " " + t)
	}
	if c := i.code(); c != "" {
		return c + ": " + text
	}
	return text
}

func joinIssues(is []issue) string {
	s := make([]string, len(is))
	for i, x := range is {
		s[i] = x.String()
	}
	return strings.Join(s, "; ")
}

// partsOf maps record ids back to the request's cells and dates; ok is
// false if any id is unknown (the vendor then named something the request
// did not label, and the whole message counts as refused).
func partsOf(req Request, ids []string) ([]Cell, bool) {
	byCell := map[int]map[string]bool{}
	for _, id := range ids {
		p, ok := req.Locators[id]
		if !ok || p.Cell >= len(req.Work.Cells) {
			return nil, false
		}
		if byCell[p.Cell] == nil {
			byCell[p.Cell] = map[string]bool{}
		}
		for _, d := range req.Work.Cells[p.Cell].Days {
			if d.Date >= p.From && d.Date <= p.To {
				byCell[p.Cell][d.Date] = true
			}
		}
	}
	idx := make([]int, 0, len(byCell))
	for i := range byCell {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	var out []Cell
	for _, i := range idx {
		c := req.Work.Cells[i]
		c.Kind = req.Work.kindOf(c)
		days := c.Days
		c.Days = nil
		for _, d := range days {
			if byCell[i][d.Date] {
				c.Days = append(c.Days, d)
			}
		}
		out = append(out, c)
	}
	return out, true
}

// accessRefused is the outcome of a 401 or 403 from a vendor whose answers
// say what they refuse: 401 refuses the credential (the pipeline then
// re-reads its secret and, still refused, pauses it); 403 refuses access
// to the hotel (Booking.com: the account has no access to that hotel id,
// or the property is no longer connected; Expedia: the hotel is not
// authorised for this account), whatever the message carried.
func accessRefused(resp Response) (Outcome, bool) {
	switch resp.Status {
	case http.StatusUnauthorized:
		return refusal(otapush.ScopeCredential, fmt.Sprintf("HTTP 401: the vendor refused the credential: %s", snippet(resp.Body))), true
	case http.StatusForbidden:
		return refusal(otapush.ScopeHotel, fmt.Sprintf("HTTP 403: the vendor refused access to the hotel: %s", snippet(resp.Body))), true
	}
	return Outcome{}, false
}

// unmarshalAnswer reads an XML answer into v. An answer cut short (the
// pipeline reads at most 64 KB of one, otapush's maxJudgedBody; or the
// connection ended) leaves in v every element read whole before the cut,
// and cut is true: the vendors put <Success/> or <Errors> first, so what
// decides the outcome is read; only the tail of a warning or error list is
// lost.
func unmarshalAnswer(body []byte, v any) (cut bool, err error) {
	err = xml.Unmarshal(body, v)
	var syn *xml.SyntaxError
	if errors.As(err, &syn) && syn.Msg == "unexpected EOF" {
		return true, nil
	}
	return false, err
}

// cutNote says an answer was cut after n bytes.
func cutNote(n int) string {
	return fmt.Sprintf("(the answer was cut after %d bytes: what followed is unread)", n)
}

// answered is the outcome of an XML answer that names no error: accepted
// (with its warnings) when it says Success on a 2xx; a 2xx that says
// neither is transient (missing says what it lacked); anything else is a
// refusal carrying the start of the body, about the message. cut says the
// answer was cut short: with Success read, it is accepted with a warning
// that says so; without, nothing before the cut decided it, and retrying
// would only fetch the same long answer again, so it is refused as the
// connection's (the lane pauses, pages and keeps its changes).
func answered(success bool, resp Response, missing string, warnings []issue, cut bool) Outcome {
	ok2xx := resp.Status >= 200 && resp.Status < 300
	switch {
	case !success && cut:
		return refusal(otapush.ScopeHotel, fmt.Sprintf("HTTP %d: %s before the cut %s", resp.Status, missing, cutNote(len(resp.Body))))
	case !success && ok2xx:
		return Outcome{Verdict: Transient, Reason: missing}
	case !success || !ok2xx:
		return refusal(otapush.ScopeMessage, fmt.Sprintf("HTTP %d: %s", resp.Status, snippet(resp.Body)))
	case len(warnings) > 0 || cut:
		ws := make([]string, len(warnings))
		for i, w := range warnings {
			ws[i] = w.String()
		}
		if cut {
			ws = append(ws, "accepted "+cutNote(len(resp.Body)))
		}
		return Outcome{Verdict: AcceptedWithWarnings, Warnings: ws}
	}
	return Outcome{Verdict: Accepted}
}
