package format

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

// OpenTravelNamespace is the namespace of OpenTravel 2003/05 messages.
const OpenTravelNamespace = "http://www.opentravel.org/OTA/2003/05"

// openTravel is the OpenTravel form Booking.com's B.XML and many OTAs take:
// availability and restrictions as OTA_HotelAvailNotifRQ, rates as
// OTA_HotelRateAmountNotifRQ. One hotel per message, one calendar month per
// message unless the endpoint says otherwise, consecutive dates with equal
// values merged into one StatusApplicationControl range, each message part
// labelled with a LocatorID that the vendor's Error RecordID names back.
// HTTP basic auth from a "username:password" secret.
//
// Values: availability available → BookingLimit, closed → RestrictionStatus
// Status Close/Open; restrictions min_los/max_los → LengthsOfStay
// SetMinLOS/SetMaxLOS, closed → RestrictionStatus, closed_to_arrival /
// closed_to_departure → RestrictionStatus Restriction Arrival / Departure;
// rates amount, currency, guests → BaseByGuestAmt AmountAfterTax,
// CurrencyCode, NumberOfGuests (a rate needs a rate plan).
//
// Answers: <Errors> refuse the parts their RecordIDs name, or the message
// when they name none; an error of the credential (EWT 4, 5, 9) or the
// hotel (EWT 6; ERR 392, 375, 497) refuses every part (see otaScope). A
// 401 refuses the credential, a 403 the hotel (Booking.com: no access to
// that hotel, or the property no longer connected).
type openTravel struct{}

func (openTravel) Traits() Traits {
	return Traits{SplitBy: SplitMonth, Credential: CredentialUserPassword, RoomTypeKinds: []string{"availability"}}
}

type otaAvailRQ struct {
	XMLName   xml.Name        `xml:"http://www.opentravel.org/OTA/2003/05 OTA_HotelAvailNotifRQ"`
	EchoToken string          `xml:"EchoToken,attr,omitempty"`
	Version   string          `xml:"Version,attr"`
	Messages  otaAvailMessage `xml:"AvailStatusMessages"`
}

type otaAvailMessage struct {
	HotelCode string         `xml:"HotelCode,attr"`
	List      []otaAvailPart `xml:"AvailStatusMessage"`
}

type otaAvailPart struct {
	LocatorID    string          `xml:"LocatorID,attr"`
	BookingLimit *int            `xml:"BookingLimit,attr,omitempty"`
	Control      otaControl      `xml:"StatusApplicationControl"`
	LOS          *otaStays       `xml:"LengthsOfStay,omitempty"`
	Status       *otaRestriction `xml:"RestrictionStatus,omitempty"`
}

type otaControl struct {
	Start        string `xml:"Start,attr"`
	End          string `xml:"End,attr"`
	InvTypeCode  string `xml:"InvTypeCode,attr"`
	RatePlanCode string `xml:"RatePlanCode,attr,omitempty"`
}

type otaStays struct {
	List []otaLOS `xml:"LengthOfStay"`
}

type otaLOS struct {
	Time int    `xml:"Time,attr"`
	Type string `xml:"MinMaxMessageType,attr"`
}

type otaRestriction struct {
	Status      string `xml:"Status,attr"`
	Restriction string `xml:"Restriction,attr,omitempty"`
}

type otaRateRQ struct {
	XMLName   xml.Name       `xml:"http://www.opentravel.org/OTA/2003/05 OTA_HotelRateAmountNotifRQ"`
	EchoToken string         `xml:"EchoToken,attr,omitempty"`
	Version   string         `xml:"Version,attr"`
	Messages  otaRateMessage `xml:"RateAmountMessages"`
}

type otaRateMessage struct {
	HotelCode string        `xml:"HotelCode,attr"`
	List      []otaRatePart `xml:"RateAmountMessage"`
}

type otaRatePart struct {
	LocatorID string     `xml:"LocatorID,attr"`
	Control   otaControl `xml:"StatusApplicationControl"`
	Amounts   []otaGuest `xml:"Rates>Rate>BaseByGuestAmts>BaseByGuestAmt"`
}

type otaGuest struct {
	AmountAfterTax string `xml:"AmountAfterTax,attr"`
	CurrencyCode   string `xml:"CurrencyCode,attr,omitempty"`
	NumberOfGuests int    `xml:"NumberOfGuests,attr,omitempty"`
}

func openStatus(closed bool) string {
	if closed {
		return "Close"
	}
	return "Open"
}

func (openTravel) Encode(w Work) (Request, error) {
	if w.HotelRef == "" {
		return Request{}, fmt.Errorf("format %s: no hotel_ref: one hotel per request", OpenTravel)
	}
	user, pw, err := w.Secret.UserPassword()
	if err != nil {
		return Request{}, fmt.Errorf("format %s: %w", OpenTravel, err)
	}
	rs, err := runs(OpenTravel, w)
	if err != nil {
		return Request{}, err
	}
	rates := w.Kind == "rates"
	for _, c := range w.Cells {
		if (w.kindOf(c) == "rates") != rates {
			return Request{}, fmt.Errorf("format %s: rates go in OTA_HotelRateAmountNotifRQ, availability and restrictions in OTA_HotelAvailNotifRQ: set kinds_per_message to 1", OpenTravel)
		}
	}
	locators := map[string]Part{}
	label := func(r run) string {
		id := strconv.Itoa(len(locators) + 1)
		locators[id] = Part{Cell: r.cell, From: r.from, To: r.to}
		return id
	}
	var msg any
	var setEcho func(string)
	if rates {
		rq := &otaRateRQ{Version: "1.0", Messages: otaRateMessage{HotelCode: w.HotelRef}}
		for _, r := range rs {
			c := w.Cells[r.cell]
			if c.RatePlan == "" {
				return Request{}, unexpressible(OpenTravel, w, r, "a rate needs a rate plan (RatePlanCode)")
			}
			rq.Messages.List = append(rq.Messages.List, otaRatePart{LocatorID: label(r),
				Control: otaControl{Start: r.from, End: r.to, InvTypeCode: c.RoomType, RatePlanCode: c.RatePlan},
				Amounts: []otaGuest{{AmountAfterTax: r.values.Amount, CurrencyCode: r.values.Currency, NumberOfGuests: r.values.Guests}}})
		}
		msg, setEcho = rq, func(s string) { rq.EchoToken = s }
	} else {
		rq := &otaAvailRQ{Version: "1.0", Messages: otaAvailMessage{HotelCode: w.HotelRef}}
		for _, r := range rs {
			c := w.Cells[r.cell]
			ctl := otaControl{Start: r.from, End: r.to, InvTypeCode: c.RoomType, RatePlanCode: c.RatePlan}
			v := r.values
			// One RestrictionStatus per AvailStatusMessage: the first
			// part carries the count, the stays and the master status,
			// arrival and departure get their own.
			first := otaAvailPart{Control: ctl, BookingLimit: v.Available}
			if v.MinLOS != nil || v.MaxLOS != nil {
				first.LOS = &otaStays{}
			}
			if v.MinLOS != nil {
				first.LOS.List = append(first.LOS.List, otaLOS{Time: *v.MinLOS, Type: "SetMinLOS"})
			}
			if v.MaxLOS != nil {
				first.LOS.List = append(first.LOS.List, otaLOS{Time: *v.MaxLOS, Type: "SetMaxLOS"})
			}
			if v.Closed != nil {
				first.Status = &otaRestriction{Status: openStatus(*v.Closed)}
			}
			parts := []otaAvailPart{first}
			if v.ClosedToArrival != nil {
				parts = append(parts, otaAvailPart{Control: ctl, Status: &otaRestriction{Status: openStatus(*v.ClosedToArrival), Restriction: "Arrival"}})
			}
			if v.ClosedToDeparture != nil {
				parts = append(parts, otaAvailPart{Control: ctl, Status: &otaRestriction{Status: openStatus(*v.ClosedToDeparture), Restriction: "Departure"}})
			}
			for _, p := range parts {
				if p.BookingLimit == nil && p.LOS == nil && p.Status == nil {
					continue
				}
				p.LocatorID = label(r)
				rq.Messages.List = append(rq.Messages.List, p)
			}
		}
		msg, setEcho = rq, func(s string) { rq.EchoToken = s }
	}
	body, err := marshalXML(msg, setEcho)
	if err != nil {
		return Request{}, fmt.Errorf("format %s: %w", OpenTravel, err)
	}
	h := http.Header{
		"Content-Type":   {"application/xml"},
		"Accept-Version": {"1.1"},
		"Authorization":  {"Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))},
	}
	return Request{Method: http.MethodPost, Header: h, Body: body, Work: w, Locators: locators}, nil
}

// otaRS is any OpenTravel answer (OTA_HotelAvailNotifRS,
// OTA_HotelRateAmountNotifRS): <Success/>, <Warnings> or <Errors>.
type otaRS struct {
	XMLName  xml.Name
	Success  *struct{} `xml:"Success"`
	Warnings []issue   `xml:"Warnings>Warning"`
	Errors   []issue   `xml:"Errors>Error"`
}

// otaRetry are OpenTravel error codes (list ERR) that say "try again":
// 187 system currently unavailable, 447 unable to update (simultaneous
// updates).
var otaRetry = map[string]bool{"187": true, "447": true}

// OpenTravel errors about the credential or the hotel rather than any part
// of the message: by error type (list EWT) 4 authentication, 5
// authentication timeout and 9 authentication model refuse the
// credential, 6 authorization the account's access to the hotel (as
// Booking.com's 497 "You do not have access to hotel"); by code (list
// ERR) 392 invalid hotel code, 375 hotel not active and 497 authorization
// error refuse the hotel.
var (
	otaCredentialTypes = map[string]bool{"4": true, "5": true, "9": true}
	otaHotelTypes      = map[string]bool{"6": true}
	otaHotelCodes      = map[string]bool{"392": true, "375": true, "497": true}
)

// otaScope is what one error is about; ScopeItem stands for "its part".
func otaScope(e issue) otapush.Scope {
	switch {
	case otaCredentialTypes[e.Type]:
		return otapush.ScopeCredential
	case otaHotelTypes[e.Type] || otaHotelCodes[e.code()]:
		return otapush.ScopeHotel
	}
	return otapush.ScopeItem
}

func (openTravel) Decode(req Request, resp Response) Outcome {
	if o, ok := byStatus(resp); ok {
		return o
	}
	if o, ok := accessRefused(resp); ok {
		return o
	}
	ok2xx := resp.Status >= 200 && resp.Status < 300
	var rs otaRS
	cut, err := unmarshalAnswer(resp.Body, &rs)
	if err != nil || !strings.HasSuffix(rs.XMLName.Local, "RS") {
		if ok2xx {
			return Outcome{Verdict: Transient, Reason: fmt.Sprintf("HTTP %d with no OpenTravel answer: %s", resp.Status, snippet(resp.Body))}
		}
		// Not an OpenTravel answer (a SOAP fault, a proxy's page): it
		// names no part, and refuses what the connection reaches.
		return refusal(otapush.ScopeHotel, fmt.Sprintf("HTTP %d with no OpenTravel answer: %s", resp.Status, snippet(resp.Body)))
	}
	if len(rs.Errors) > 0 {
		// The widest scope among the errors decides: a refused
		// credential or hotel refuses every part, named or not.
		retry, scope := true, otapush.ScopeItem
		var ids []string
		for _, e := range rs.Errors {
			retry = retry && otaRetry[e.code()]
			scope = max(scope, otaScope(e))
			ids = append(ids, e.RecordID)
		}
		reason := joinIssues(rs.Errors)
		if cut {
			reason += " " + cutNote(len(resp.Body))
		}
		if retry {
			return Outcome{Verdict: Transient, Reason: reason}
		}
		if scope != otapush.ScopeItem {
			return refusal(scope, reason)
		}
		o := refusal(otapush.ScopeMessage, reason)
		if named, ok := partsOf(req, ids); ok {
			o.Refused, o.Scope = named, otapush.ScopeItem
		}
		return o
	}
	return answered(rs.Success != nil, resp, fmt.Sprintf("%s holds neither Success nor Errors", rs.XMLName.Local), rs.Warnings, cut)
}
