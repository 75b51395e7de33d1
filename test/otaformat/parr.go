package otaformat

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"sort"
	"strconv"
)

// ExpediaPARRNS is the namespace of Expedia's Products, Availability and
// Rates Retrieval (PARR) messages.
const ExpediaPARRNS = "http://www.expediaconnect.com/EQC/PAR/2013/07"

// Read is a PARR request as the vendor reads it.
type Read struct {
	User, Password, Hotel string
	From, To              string
}

// IsExpediaPARR reports whether body's root element is a
// ProductAvailRateRetrievalRQ (in any namespace: DecodeExpediaPARR
// refuses a wrong one).
func IsExpediaPARR(body []byte) bool {
	d := xml.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		if se, ok := tok.(xml.StartElement); ok {
			return se.Name.Local == "ProductAvailRateRetrievalRQ"
		}
	}
}

// DecodeExpediaPARR reads a ProductAvailRateRetrievalRQ as Expedia would;
// an error is a *Refusal answered inside a 200, with what was read of the
// credential and hotel.
func DecodeExpediaPARR(body []byte) (Read, error) {
	var rq struct {
		XMLName xml.Name
		Auth    struct {
			User     string `xml:"username,attr"`
			Password string `xml:"password,attr"`
		} `xml:"Authentication"`
		Hotel struct {
			ID string `xml:"id,attr"`
		} `xml:"Hotel"`
		Range *struct {
			From string `xml:"from,attr"`
			To   string `xml:"to,attr"`
		} `xml:"ParamSet>AvailRateRetrieval"`
	}
	var r Read
	refuse := func(code, format string, args ...any) (Read, error) {
		return r, &Refusal{Status: 200, Code: code, Text: fmt.Sprintf(format, args...)}
	}
	if err := xml.Unmarshal(body, &rq); err != nil {
		return refuse(ARParseError, "Parsing error: %v", err)
	}
	r = Read{User: rq.Auth.User, Password: rq.Auth.Password, Hotel: rq.Hotel.ID}
	if rq.XMLName.Space != ExpediaPARRNS || rq.XMLName.Local != "ProductAvailRateRetrievalRQ" {
		return refuse(ARNamespace, "The namespace specified is invalid: {%s}%s", rq.XMLName.Space, rq.XMLName.Local)
	}
	if r.User == "" || r.Password == "" {
		return refuse(ARAuth, "Authentication error: invalid username or password")
	}
	if r.Hotel == "" {
		return refuse(ARHotel, "Hotel id is missing")
	}
	if rq.Range == nil {
		return refuse(ARParseError, "ParamSet has no AvailRateRetrieval")
	}
	if _, err := span(rq.Range.From, rq.Range.To); err != nil {
		return refuse(ARParseError, "AvailRateRetrieval: %v", err)
	}
	r.From, r.To = rq.Range.From, rq.Range.To
	return r, nil
}

// Product is a room type (RatePlan "") or one of its rate plans at a hotel.
type Product struct{ RoomType, RatePlan string }

// AnswerExpediaPARR is Expedia's ProductAvailRateRetrievalRS for dates
// from..to of what a hotel holds (held: date → product → fields in the
// vocabulary of Message.Values), or its <Error> when refusal is set.
func AnswerExpediaPARR(refusal *Refusal, from, to string, held map[string]map[Product]map[string]any) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?><ProductAvailRateRetrievalRS xmlns="%s">`, ExpediaPARRNS)
	if refusal != nil {
		fmt.Fprintf(&b, `<Error code="%s">%s</Error></ProductAvailRateRetrievalRS>`, esc(refusal.Code), esc(refusal.Text))
		return b.Bytes()
	}
	b.WriteString("<AvailRateList>")
	dates, _ := span(from, to)
	for _, d := range dates {
		products := held[d]
		if len(products) == 0 {
			continue
		}
		rooms := map[string][]string{} // room → its plans
		for p := range products {
			if _, ok := rooms[p.RoomType]; !ok {
				rooms[p.RoomType] = nil
			}
			if p.RatePlan != "" {
				rooms[p.RoomType] = append(rooms[p.RoomType], p.RatePlan)
			}
		}
		ids := make([]string, 0, len(rooms))
		for r := range rooms {
			ids = append(ids, r)
		}
		sort.Strings(ids)
		fmt.Fprintf(&b, `<AvailRate date="%s">`, d)
		for _, room := range ids {
			own := products[Product{RoomType: room}]
			fmt.Fprintf(&b, `<RoomType id="%s"%s>`, esc(room), boolAttr("closed", own["closed"]))
			if n, ok := own["available"]; ok {
				fmt.Fprintf(&b, `<Inventory totalInventoryAvailable="%v"/>`, n)
			}
			plans := rooms[room]
			sort.Strings(plans)
			for _, plan := range plans {
				f := products[Product{RoomType: room, RatePlan: plan}]
				fmt.Fprintf(&b, `<RatePlan id="%s"%s>`, esc(plan), boolAttr("closed", f["closed"]))
				if amount, ok := f["amount"]; ok {
					fmt.Fprintf(&b, `<Rate currency="%s"><PerDay rate="%s"/></Rate>`, esc(fmt.Sprint(f["currency"])), esc(fmt.Sprint(amount)))
				}
				var r bytes.Buffer
				for _, a := range []struct{ attr, field string }{{"minLOS", "min_los"}, {"maxLOS", "max_los"}} {
					if v, ok := f[a.field]; ok {
						fmt.Fprintf(&r, ` %s="%v"`, a.attr, v)
					}
				}
				r.WriteString(boolAttr("closedToArrival", f["closed_to_arrival"]))
				r.WriteString(boolAttr("closedToDeparture", f["closed_to_departure"]))
				if r.Len() > 0 {
					fmt.Fprintf(&b, `<Restrictions%s/>`, r.String())
				}
				b.WriteString("</RatePlan>")
			}
			b.WriteString("</RoomType>")
		}
		b.WriteString("</AvailRate>")
	}
	b.WriteString("</AvailRateList></ProductAvailRateRetrievalRS>")
	return b.Bytes()
}

// boolAttr is ` name="true"` for a bool v, "" for anything else.
func boolAttr(name string, v any) string {
	if b, ok := v.(bool); ok {
		return " " + name + `="` + strconv.FormatBool(b) + `"`
	}
	return ""
}
