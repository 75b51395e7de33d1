package format

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strconv"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

// ExpediaARNamespace is the namespace of the Expedia Availability and
// Rates (EQC AR) messages the expedia-ar format sends.
const ExpediaARNamespace = "http://www.expediaconnect.com/EQC/AR/2011/06"

// ExpediaARMaxUpdates is Expedia AR's cap on the updates of one message;
// fleetbucket counts one per room type × rate plan × date, which is never
// fewer than Expedia counts.
const ExpediaARMaxUpdates = 5000

// expediaAR is Expedia's AvailRateUpdateRQ: the credential in the body
// (Authentication username/password, from a "username:password" secret),
// the hotel id, and one AvailRateUpdate per range of equal values.
//
// Values: availability without a rate plan available → Inventory
// totalInventoryAvailable, closed → RoomType closed; availability with a
// rate plan closed → RatePlan closed (inventory is per room type);
// rates amount + currency (required) → Rate currency / PerDay rate (no
// occupancy: guests is refused); restrictions (rate plan required)
// closed → RatePlan closed, min_los, max_los, closed_to_arrival,
// closed_to_departure → Restrictions minLOS, maxLOS, closedToArrival,
// closedToDeparture.
//
// Expedia processes nothing of a message that holds one error, and says so
// in a 200: an <Error> is Refused, for the whole message (Isolate then
// halves it), except authentication codes (1000–1999), which refuse the
// credential, and 3210 and codes from 4000, Transient (see arScope). A 401
// refuses the credential, a 403 the hotel (not authorised for the account).
type expediaAR struct{}

func (expediaAR) Traits() Traits {
	return Traits{MaxItems: ExpediaARMaxUpdates, SplitBy: SplitNone, Credential: CredentialUserPassword, RoomTypeKinds: []string{"availability"}}
}

type arRQ struct {
	XMLName xml.Name   `xml:"http://www.expediaconnect.com/EQC/AR/2011/06 AvailRateUpdateRQ"`
	Auth    arAuth     `xml:"Authentication"`
	Hotel   arID       `xml:"Hotel"`
	Updates []arUpdate `xml:"AvailRateUpdate"`
}

type arAuth struct {
	Username string `xml:"username,attr"`
	Password string `xml:"password,attr"`
}

type arID struct {
	ID string `xml:"id,attr"`
}

type arUpdate struct {
	DateRange arDateRange `xml:"DateRange"`
	RoomType  arRoomType  `xml:"RoomType"`
}

type arDateRange struct {
	From string `xml:"from,attr"`
	To   string `xml:"to,attr"`
}

type arRoomType struct {
	ID        string       `xml:"id,attr"`
	Closed    *bool        `xml:"closed,attr,omitempty"`
	Inventory *arInventory `xml:"Inventory,omitempty"`
	RatePlan  *arRatePlan  `xml:"RatePlan,omitempty"`
}

type arInventory struct {
	Total int `xml:"totalInventoryAvailable,attr"`
}

type arRatePlan struct {
	ID           string          `xml:"id,attr"`
	Closed       *bool           `xml:"closed,attr,omitempty"`
	Rate         *arRate         `xml:"Rate,omitempty"`
	Restrictions *arRestrictions `xml:"Restrictions,omitempty"`
}

type arRate struct {
	Currency string   `xml:"currency,attr"`
	PerDay   arPerDay `xml:"PerDay"`
}

type arPerDay struct {
	Rate string `xml:"rate,attr"`
}

type arRestrictions struct {
	MinLOS            *int  `xml:"minLOS,attr,omitempty"`
	MaxLOS            *int  `xml:"maxLOS,attr,omitempty"`
	ClosedToArrival   *bool `xml:"closedToArrival,attr,omitempty"`
	ClosedToDeparture *bool `xml:"closedToDeparture,attr,omitempty"`
}

func (expediaAR) Encode(w Work) (Request, error) {
	if w.HotelRef == "" {
		return Request{}, fmt.Errorf("format %s: no hotel_ref", ExpediaAR)
	}
	if n := w.Items(); n > ExpediaARMaxUpdates {
		return Request{}, fmt.Errorf("format %s: %d updates in one message, more than the %d allowed (format.Encode splits them)", ExpediaAR, n, ExpediaARMaxUpdates)
	}
	user, pw, err := w.Secret.UserPassword()
	if err != nil {
		return Request{}, fmt.Errorf("format %s: %w", ExpediaAR, err)
	}
	rs, err := runs(ExpediaAR, w)
	if err != nil {
		return Request{}, err
	}
	rq := arRQ{Auth: arAuth{Username: user, Password: pw}, Hotel: arID{ID: w.HotelRef}}
	for _, r := range rs {
		u, err := arUpdateOf(w, r)
		if err != nil {
			return Request{}, err
		}
		rq.Updates = append(rq.Updates, u)
	}
	body, err := marshalXML(rq, nil)
	if err != nil {
		return Request{}, fmt.Errorf("format %s: %w", ExpediaAR, err)
	}
	return Request{Method: http.MethodPost, Header: http.Header{"Content-Type": {"text/xml"}}, Body: body, Work: w}, nil
}

func arUpdateOf(w Work, r run) (arUpdate, error) {
	c, v := w.Cells[r.cell], r.values
	u := arUpdate{DateRange: arDateRange{From: r.from, To: r.to}, RoomType: arRoomType{ID: c.RoomType}}
	bad := func(reason string) (arUpdate, error) { return arUpdate{}, unexpressible(ExpediaAR, w, r, reason) }
	plan := &arRatePlan{ID: c.RatePlan}
	switch w.kindOf(c) {
	case "availability":
		if c.RatePlan == "" {
			u.RoomType.Closed = v.Closed
			if v.Available != nil {
				u.RoomType.Inventory = &arInventory{Total: *v.Available}
			}
			return u, nil
		}
		if v.Available != nil {
			return bad("Expedia AR counts inventory per room type; send available without a rate plan")
		}
		plan.Closed = v.Closed
	case "rates":
		switch {
		case c.RatePlan == "":
			return bad("a rate needs a rate plan")
		case v.Currency == "":
			return bad("Expedia AR needs the rate's currency")
		case v.Guests != 0:
			return bad("the format sends per-day rates; guests (occupancy pricing) is not supported")
		}
		plan.Rate = &arRate{Currency: v.Currency, PerDay: arPerDay{Rate: v.Amount}}
	case "restrictions":
		if c.RatePlan == "" {
			return bad("Expedia AR restrictions belong to a rate plan")
		}
		plan.Closed = v.Closed
		if v.MinLOS != nil || v.MaxLOS != nil || v.ClosedToArrival != nil || v.ClosedToDeparture != nil {
			plan.Restrictions = &arRestrictions{MinLOS: v.MinLOS, MaxLOS: v.MaxLOS, ClosedToArrival: v.ClosedToArrival, ClosedToDeparture: v.ClosedToDeparture}
		}
	}
	u.RoomType.RatePlan = plan
	return u, nil
}

// arRS is AvailRateUpdateRS: <Success/> with optional <Warning>s, or
// <Error code="…">text</Error>s.
type arRS struct {
	XMLName  xml.Name
	Success  *struct{} `xml:"Success"`
	Warnings []issue   `xml:"Warning"`
	Errors   []issue   `xml:"Error"`
}

// Expedia AR's error codes by what they are about (error messaging of the
// EQC AR API): 1000–1999 authentication (the credential: nothing in the
// message was wrong); 3210 "connection refused: enter retry mode" and
// codes from 4000 (errors on Expedia's side once the connection was
// established) are retried as they are; every other code (parsing 2002,
// 2010, 3010; business errors such as 3015, 3202) refuses the message, and
// Expedia does not say which update caused it.
const arRetry = "3210"

// arErrorsScope is what an answer's errors are about together: a
// credential refused outranks the rest; retry if any is Expedia's own.
func arErrorsScope(errs []issue) (scope otapush.Scope, retry bool) {
	scope = otapush.ScopeMessage
	for _, e := range errs {
		s, r := arScope(e.code())
		retry = retry || r
		if s == otapush.ScopeCredential {
			scope = s
		}
	}
	return scope, retry
}

// arScope is what one error code is about; retry says it is Expedia's own
// failure, to send again unchanged.
func arScope(code string) (scope otapush.Scope, retry bool) {
	n, err := strconv.Atoi(code)
	switch {
	case code == arRetry || err == nil && n >= 4000:
		return otapush.ScopeUnstated, true
	case err == nil && n >= 1000 && n < 2000:
		return otapush.ScopeCredential, false
	}
	return otapush.ScopeMessage, false
}

func (expediaAR) Decode(_ Request, resp Response) Outcome {
	if o, ok := byStatus(resp); ok {
		return o
	}
	if o, ok := accessRefused(resp); ok {
		return o
	}
	ok2xx := resp.Status >= 200 && resp.Status < 300
	var rs arRS
	cut, err := unmarshalAnswer(resp.Body, &rs)
	if err != nil || rs.XMLName.Local != "AvailRateUpdateRS" {
		if ok2xx {
			return Outcome{Verdict: Transient, Reason: fmt.Sprintf("HTTP %d with no AvailRateUpdateRS: %s", resp.Status, snippet(resp.Body))}
		}
		// Not Expedia's answer (a proxy's page, a SOAP fault): it names
		// no update, and refuses what the connection reaches.
		return refusal(otapush.ScopeHotel, fmt.Sprintf("HTTP %d with no AvailRateUpdateRS: %s", resp.Status, snippet(resp.Body)))
	}
	if len(rs.Errors) > 0 {
		// Nothing in the message was processed. A credential refused
		// outranks the rest: no message on it can go, whatever it holds.
		scope, retry := arErrorsScope(rs.Errors)
		reason := joinIssues(rs.Errors)
		if cut {
			reason += " " + cutNote(len(resp.Body))
		}
		if retry && scope != otapush.ScopeCredential {
			return Outcome{Verdict: Transient, Reason: reason}
		}
		return refusal(scope, reason)
	}
	return answered(rs.Success != nil, resp, "AvailRateUpdateRS holds neither Success nor Error", rs.Warnings, cut)
}
