package otaformat

import (
	"encoding/xml"
	"fmt"
	"strconv"
	"time"
)

// The request as a vendor reads it: only what it acts on.
type otRequest struct {
	XMLName xml.Name
	Avail   *struct {
		HotelCode string     `xml:"HotelCode,attr"`
		Parts     []otAvPart `xml:"AvailStatusMessage"`
	} `xml:"AvailStatusMessages"`
	Rates *struct {
		HotelCode string       `xml:"HotelCode,attr"`
		Parts     []otRatePart `xml:"RateAmountMessage"`
	} `xml:"RateAmountMessages"`
}

type otScope struct {
	Start string `xml:"Start,attr"`
	End   string `xml:"End,attr"`
	Room  string `xml:"InvTypeCode,attr"`
	Plan  string `xml:"RatePlanCode,attr"`
}

type otAvPart struct {
	Locator      string  `xml:"LocatorID,attr"`
	BookingLimit string  `xml:"BookingLimit,attr"`
	Scope        otScope `xml:"StatusApplicationControl"`
	Stays        []struct {
		Time string `xml:"Time,attr"`
		Type string `xml:"MinMaxMessageType,attr"`
	} `xml:"LengthsOfStay>LengthOfStay"`
	Statuses []struct {
		Status      string `xml:"Status,attr"`
		Restriction string `xml:"Restriction,attr"`
	} `xml:"RestrictionStatus"`
}

type otRatePart struct {
	Locator string  `xml:"LocatorID,attr"`
	Scope   otScope `xml:"StatusApplicationControl"`
	Amounts []struct {
		After    string `xml:"AmountAfterTax,attr"`
		Currency string `xml:"CurrencyCode,attr"`
		Guests   string `xml:"NumberOfGuests,attr"`
	} `xml:"Rates>Rate>BaseByGuestAmts>BaseByGuestAmt"`
}

// DecodeOpenTravel reads an OTA_HotelAvailNotifRQ (kind availability or
// restrictions) or OTA_HotelRateAmountNotifRQ (kind rates) as Booking.com
// would. A *Refusal says what the vendor answers instead of applying it:
// a request it cannot read (400), or parts naming an unmapped room type
// (200 with Errors whose RecordIDs are those parts' LocatorIDs; nothing is
// applied).
func DecodeOpenTravel(body []byte, kind string, rules Rules) (Message, error) {
	var rq otRequest
	if err := xml.Unmarshal(body, &rq); err != nil {
		return Message{}, &Refusal{Status: 400, Code: "XML_PARSE_ERROR", Text: err.Error()}
	}
	if rq.XMLName.Space != OpenTravelNS {
		return Message{}, &Refusal{Status: 400, Code: "INVALID_NAMESPACE", Text: fmt.Sprintf("namespace %q, want %s", rq.XMLName.Space, OpenTravelNS)}
	}
	wantRoot := "OTA_HotelAvailNotifRQ"
	if kind == "rates" {
		wantRoot = "OTA_HotelRateAmountNotifRQ"
	}
	if rq.XMLName.Local != wantRoot {
		return Message{}, &Refusal{Status: 400, Code: "WRONG_MESSAGE", Text: fmt.Sprintf("%s sent for %s, want %s", rq.XMLName.Local, kind, wantRoot)}
	}
	m := Message{}
	var scopes []otScope
	var locators []string
	type field struct {
		name string
		val  any
	}
	var fields [][]field
	switch {
	case rq.Avail != nil:
		m.Hotel = rq.Avail.HotelCode
		for _, p := range rq.Avail.Parts {
			var fs []field
			if p.BookingLimit != "" {
				n, err := strconv.Atoi(p.BookingLimit)
				if err != nil || n < 0 {
					return Message{}, &Refusal{Status: 400, Code: "INVALID_BOOKING_LIMIT", Text: p.BookingLimit}
				}
				fs = append(fs, field{"available", n})
			}
			for _, s := range p.Stays {
				n, err := strconv.Atoi(s.Time)
				name := map[string]string{"SetMinLOS": "min_los", "SetMaxLOS": "max_los"}[s.Type]
				if err != nil || name == "" {
					return Message{}, &Refusal{Status: 400, Code: "INVALID_LENGTH_OF_STAY", Text: s.Type + " " + s.Time}
				}
				fs = append(fs, field{name, n})
			}
			for _, s := range p.Statuses {
				name := map[string]string{"": "closed", "Master": "closed", "Arrival": "closed_to_arrival", "Departure": "closed_to_departure"}[s.Restriction]
				if name == "" || (s.Status != "Open" && s.Status != "Close") {
					return Message{}, &Refusal{Status: 400, Code: "INVALID_RESTRICTION", Text: s.Restriction + " " + s.Status}
				}
				fs = append(fs, field{name, s.Status == "Close"})
			}
			scopes, locators, fields = append(scopes, p.Scope), append(locators, p.Locator), append(fields, fs)
		}
	case rq.Rates != nil:
		m.Hotel = rq.Rates.HotelCode
		for _, p := range rq.Rates.Parts {
			var fs []field
			for _, a := range p.Amounts {
				fs = append(fs, field{"amount", a.After})
				if a.Currency != "" {
					fs = append(fs, field{"currency", a.Currency})
				}
				if a.Guests != "" {
					n, err := strconv.Atoi(a.Guests)
					if err != nil {
						return Message{}, &Refusal{Status: 400, Code: "INVALID_GUESTS", Text: a.Guests}
					}
					fs = append(fs, field{"guests", n})
				}
			}
			if p.Scope.Plan == "" {
				return Message{}, &Refusal{Status: 400, Code: "RATE_PLAN_MISSING", Text: "a rate needs RatePlanCode"}
			}
			scopes, locators, fields = append(scopes, p.Scope), append(locators, p.Locator), append(fields, fs)
		}
	}
	if m.Hotel == "" {
		return Message{}, &Refusal{Status: 400, Code: "HOTEL_ID_MISSING", Text: "no HotelCode: one hotel per request"}
	}
	month := ""
	var unmapped []string
	for i, sc := range scopes {
		dates, err := span(sc.Start, sc.End)
		if err != nil {
			return Message{}, &Refusal{Status: 400, Code: "NOT_A_VALID_DATE", Text: err.Error()}
		}
		for _, d := range dates {
			if month == "" {
				month = d[:7]
			}
			if d[:7] != month {
				return Message{}, &Refusal{Status: 400, Code: "MORE_THAN_ONE_MONTH", Text: fmt.Sprintf("dates of %s and %s in one request: send one month per request", month, d[:7])}
			}
		}
		if !rules.mapped(sc.Room) {
			unmapped = append(unmapped, locators[i])
			continue
		}
		for _, d := range dates {
			for _, f := range fields[i] {
				m.put(Key{Hotel: m.Hotel, Kind: kind, RoomType: sc.Room, RatePlan: sc.Plan, Date: d}, f.name, f.val)
			}
		}
	}
	if len(unmapped) > 0 {
		return Message{}, &Refusal{Status: 200, Code: "402", Text: "Room ID is not valid for this hotel", RecordIDs: unmapped}
	}
	return m, nil
}

// span lists the dates from..to, inclusive.
func span(from, to string) ([]string, error) {
	a, err := time.Parse("2006-01-02", from)
	if err != nil {
		return nil, fmt.Errorf("start %q is not a date", from)
	}
	b, err := time.Parse("2006-01-02", to)
	if err != nil {
		return nil, fmt.Errorf("end %q is not a date", to)
	}
	if b.Before(a) {
		return nil, fmt.Errorf("range %s..%s is inverted", from, to)
	}
	var out []string
	for d := a; !d.After(b); d = d.AddDate(0, 0, 1) {
		out = append(out, d.Format("2006-01-02"))
	}
	return out, nil
}
