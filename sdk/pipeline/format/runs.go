package format

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

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

// authRefused is the outcome of a 401 or 403: the pipeline's credential
// refresh decides from the status whether to retry with a rotated secret.
func authRefused(resp Response) (Outcome, bool) {
	if resp.Status == http.StatusUnauthorized || resp.Status == http.StatusForbidden {
		return Outcome{Verdict: Refused, Reason: fmt.Sprintf("HTTP %d: the vendor refused the credential: %s", resp.Status, snippet(resp.Body))}, true
	}
	return Outcome{}, false
}

// answered is the outcome of an XML answer that names no error: accepted
// (with its warnings) when it says Success on a 2xx; a 2xx that says
// neither is transient (missing says what it lacked); anything else is a
// refusal carrying the start of the body.
func answered(success bool, resp Response, missing string, warnings []issue) Outcome {
	ok2xx := resp.Status >= 200 && resp.Status < 300
	switch {
	case !success && ok2xx:
		return Outcome{Verdict: Transient, Reason: missing}
	case !success || !ok2xx:
		return Outcome{Verdict: Refused, Reason: fmt.Sprintf("HTTP %d: %s", resp.Status, snippet(resp.Body))}
	case len(warnings) > 0:
		ws := make([]string, len(warnings))
		for i, w := range warnings {
			ws[i] = w.String()
		}
		return Outcome{Verdict: AcceptedWithWarnings, Warnings: ws}
	}
	return Outcome{Verdict: Accepted}
}
