package format

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strconv"

	"github.com/fleetbucket/fleetbucket/sdk/otapush"
)

// ExpediaPARRNamespace is the namespace of Expedia's Products,
// Availability and Rates Retrieval (EQC PARR) messages, which the
// expedia-ar format reads with.
const ExpediaPARRNamespace = "http://www.expediaconnect.com/EQC/PAR/2013/07"

// ExpediaPARRMaxDays is the window one read of expedia-ar asks for at
// most: a calendar month's worth, so that an answer for a hotel of 20
// room-rates stays a few hundred KB. Expedia publishes no figure fleetbucket
// relies on; a longer check is read in windows of this size.
const ExpediaPARRMaxDays = 31

// What the expedia-ar read relies on of PARR (Expedia QuickConnect's
// Products, Availability and Rates Retrieval API; the shape below is what
// fleetbucket sends and reads, in the structure of the AR messages it
// pairs with):
//
//	<ProductAvailRateRetrievalRQ xmlns="http://www.expediaconnect.com/EQC/PAR/2013/07">
//	  <Authentication username="…" password="…"/>
//	  <Hotel id="…"/>
//	  <ParamSet><AvailRateRetrieval from="2027-01-01" to="2027-01-31"/></ParamSet>
//	</ProductAvailRateRetrievalRQ>
//
// answered by ProductAvailRateRetrievalRS holding either <Error code="…">
// (the AR codes and scopes: arScope) or an AvailRateList of one AvailRate
// per date, each with the room types as AR writes them:
//
//	<AvailRate date="2027-01-10">
//	  <RoomType id="…" closed="false">
//	    <Inventory totalInventoryAvailable="5"/>
//	    <RatePlan id="…" closed="false">
//	      <Rate currency="EUR"><PerDay rate="129.00"/></Rate>
//	      <Restrictions minLOS="1" maxLOS="28" closedToArrival="false" closedToDeparture="false"/>
//	    </RatePlan>
//	  </RoomType>
//	</AvailRate>
//
// Each date's values go back to the cells the AR encoder writes them from
// (expediaAR's doc): a room type's inventory and closed are availability
// of (room, ""); a rate plan's closed is both availability of (room, plan)
// and restrictions of (room, plan), which write the same field; its rate
// is rates of (room, plan) and its restrictions restrictions of (room,
// plan). An attribute the answer leaves out is a value the OTA does not
// hold.
type parrRQ struct {
	XMLName xml.Name  `xml:"http://www.expediaconnect.com/EQC/PAR/2013/07 ProductAvailRateRetrievalRQ"`
	Auth    arAuth    `xml:"Authentication"`
	Hotel   arID      `xml:"Hotel"`
	Params  parrParam `xml:"ParamSet"`
}

type parrParam struct {
	AvailRate arDateRange `xml:"AvailRateRetrieval"`
}

type parrRS struct {
	XMLName xml.Name
	Errors  []issue `xml:"Error"`
	List    *struct {
		Dates []struct {
			Date  string `xml:"date,attr"`
			Rooms []struct {
				ID        string `xml:"id,attr"`
				Closed    string `xml:"closed,attr"`
				Inventory *struct {
					Total string `xml:"totalInventoryAvailable,attr"`
				} `xml:"Inventory"`
				Plans []struct {
					ID     string `xml:"id,attr"`
					Closed string `xml:"closed,attr"`
					Rate   *struct {
						Currency string `xml:"currency,attr"`
						PerDay   *struct {
							Rate string `xml:"rate,attr"`
						} `xml:"PerDay"`
					} `xml:"Rate"`
					Restrictions *struct {
						MinLOS string `xml:"minLOS,attr"`
						MaxLOS string `xml:"maxLOS,attr"`
						CTA    string `xml:"closedToArrival,attr"`
						CTD    string `xml:"closedToDeparture,attr"`
					} `xml:"Restrictions"`
				} `xml:"RatePlan"`
			} `xml:"RoomType"`
		} `xml:"AvailRate"`
	} `xml:"AvailRateList"`
}

func (expediaAR) ReadTraits() ReadTraits { return ReadTraits{MaxDays: ExpediaPARRMaxDays} }

func (expediaAR) EncodeRead(q ReadQuery) (Request, error) {
	if q.HotelRef == "" {
		return Request{}, fmt.Errorf("format %s read: no hotel_ref", ExpediaAR)
	}
	if q.From == "" || q.To < q.From {
		return Request{}, fmt.Errorf("format %s read: window %s..%s", ExpediaAR, q.From, q.To)
	}
	user, pw, err := q.Secret.UserPassword()
	if err != nil {
		return Request{}, fmt.Errorf("format %s read: %w", ExpediaAR, err)
	}
	rq := parrRQ{Auth: arAuth{Username: user, Password: pw}, Hotel: arID{ID: q.HotelRef},
		Params: parrParam{AvailRate: arDateRange{From: q.From, To: q.To}}}
	body, err := marshalXML(rq, nil)
	if err != nil {
		return Request{}, fmt.Errorf("format %s read: %w", ExpediaAR, err)
	}
	return Request{Method: http.MethodPost, Header: http.Header{"Content-Type": {"text/xml"}}, Body: body,
		Work: Work{HotelRef: q.HotelRef, Secret: q.Secret}}, nil
}

func (expediaAR) DecodeRead(q ReadQuery, resp Response) (Holding, Outcome) {
	if o, ok := byStatus(resp); ok {
		return nil, o
	}
	if o, ok := accessRefused(resp); ok {
		return nil, o
	}
	var rs parrRS
	if err := xml.Unmarshal(resp.Body, &rs); err != nil || rs.XMLName.Local != "ProductAvailRateRetrievalRS" {
		// A read answered in part is no answer: a cell cut off would
		// count as drift.
		return nil, Outcome{Verdict: Transient, Reason: fmt.Sprintf("HTTP %d with no whole ProductAvailRateRetrievalRS: %s", resp.Status, snippet(resp.Body))}
	}
	if len(rs.Errors) > 0 {
		scope, retry := arErrorsScope(rs.Errors)
		if retry && scope != otapush.ScopeCredential {
			return nil, Outcome{Verdict: Transient, Reason: joinIssues(rs.Errors)}
		}
		return nil, refusal(scope, joinIssues(rs.Errors))
	}
	if resp.Status < 200 || resp.Status >= 300 || rs.List == nil {
		return nil, refusal(otapush.ScopeMessage, fmt.Sprintf("HTTP %d: ProductAvailRateRetrievalRS without AvailRateList: %s", resp.Status, snippet(resp.Body)))
	}
	h := Holding{}
	bad := func(what, v string) (Holding, Outcome) {
		return nil, Outcome{Verdict: Refused, Scope: otapush.ScopeMessage, Reason: fmt.Sprintf("ProductAvailRateRetrievalRS: %s %q", what, v)}
	}
	for _, d := range rs.List.Dates {
		if d.Date < q.From || d.Date > q.To {
			continue
		}
		for _, room := range d.Rooms {
			var own Values
			if room.Closed != "" {
				b, err := strconv.ParseBool(room.Closed)
				if err != nil {
					return bad("RoomType closed", room.Closed)
				}
				own.Closed = &b
			}
			if room.Inventory != nil {
				n, err := strconv.Atoi(room.Inventory.Total)
				if err != nil {
					return bad("totalInventoryAvailable", room.Inventory.Total)
				}
				own.Available = &n
			}
			h.put(HeldCell{Kind: "availability", RoomType: room.ID}, d.Date, own)
			for _, p := range room.Plans {
				var avail, rates, restr Values
				if p.Closed != "" {
					b, err := strconv.ParseBool(p.Closed)
					if err != nil {
						return bad("RatePlan closed", p.Closed)
					}
					avail.Closed, restr.Closed = &b, &b
				}
				if p.Rate != nil && p.Rate.PerDay != nil {
					rates.Amount, rates.Currency = p.Rate.PerDay.Rate, p.Rate.Currency
				}
				if r := p.Restrictions; r != nil {
					for _, f := range []struct {
						attr string
						v    string
						to   **int
					}{{"minLOS", r.MinLOS, &restr.MinLOS}, {"maxLOS", r.MaxLOS, &restr.MaxLOS}} {
						if f.v == "" {
							continue
						}
						n, err := strconv.Atoi(f.v)
						if err != nil {
							return bad(f.attr, f.v)
						}
						*f.to = &n
					}
					for _, f := range []struct {
						attr string
						v    string
						to   **bool
					}{{"closedToArrival", r.CTA, &restr.ClosedToArrival}, {"closedToDeparture", r.CTD, &restr.ClosedToDeparture}} {
						if f.v == "" {
							continue
						}
						b, err := strconv.ParseBool(f.v)
						if err != nil {
							return bad(f.attr, f.v)
						}
						*f.to = &b
					}
				}
				h.put(HeldCell{Kind: "availability", RoomType: room.ID, RatePlan: p.ID}, d.Date, avail)
				h.put(HeldCell{Kind: "rates", RoomType: room.ID, RatePlan: p.ID}, d.Date, rates)
				h.put(HeldCell{Kind: "restrictions", RoomType: room.ID, RatePlan: p.ID}, d.Date, restr)
			}
		}
	}
	return h, Outcome{Verdict: Accepted}
}
