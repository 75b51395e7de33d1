package otaformat

import (
	"encoding/xml"
	"fmt"
	"strconv"
)

type arRequest struct {
	XMLName xml.Name
	Auth    struct {
		User     string `xml:"username,attr"`
		Password string `xml:"password,attr"`
	} `xml:"Authentication"`
	Hotel struct {
		ID string `xml:"id,attr"`
	} `xml:"Hotel"`
	Updates []struct {
		Range struct {
			From string `xml:"from,attr"`
			To   string `xml:"to,attr"`
		} `xml:"DateRange"`
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
	} `xml:"AvailRateUpdate"`
}

// Expedia AR error codes the imitation answers with.
const (
	ARParseError    = "2002"
	ARNamespace     = "2010"
	ARAuth          = "1001"
	ARHotel         = "3015"
	ARTooMany       = "3103"
	ARUnmappedRoom  = "3202"
	ARConnectionRef = "3210"
)

// DecodeExpediaAR reads an AvailRateUpdateRQ as Expedia would. Any error
// refuses the whole message (Expedia processes none of it) and is answered
// in a 200, as Expedia does: a *Refusal with Status 200; the Message then
// holds the username and hotel id, if the request had them.
func DecodeExpediaAR(body []byte, kind string, rules Rules) (Message, error) {
	var m Message
	// A refusal keeps what was read of the credential and hotel: the
	// vendor still knows whose request it refused.
	refuse := func(code, format string, args ...any) (Message, error) {
		return Message{Hotel: m.Hotel, User: m.User}, &Refusal{Status: 200, Code: code, Text: fmt.Sprintf(format, args...)}
	}
	var rq arRequest
	if err := xml.Unmarshal(body, &rq); err != nil {
		return refuse(ARParseError, "Parsing error: %v", err)
	}
	m.User, m.Hotel = rq.Auth.User, rq.Hotel.ID
	if rq.XMLName.Space != ExpediaARNS || rq.XMLName.Local != "AvailRateUpdateRQ" {
		return refuse(ARNamespace, "The namespace specified is invalid: {%s}%s", rq.XMLName.Space, rq.XMLName.Local)
	}
	if rq.Auth.User == "" || rq.Auth.Password == "" {
		return refuse(ARAuth, "Authentication error: invalid username or password")
	}
	if rq.Hotel.ID == "" {
		return refuse(ARHotel, "Hotel id is missing")
	}
	m.Password = rq.Auth.Password
	updates := 0
	for _, u := range rq.Updates {
		dates, err := span(u.Range.From, u.Range.To)
		if err != nil {
			return refuse(ARParseError, "DateRange: %v", err)
		}
		for _, room := range u.Rooms {
			if !rules.mapped(room.ID) {
				return refuse(ARUnmappedRoom, "Room type %s is not mapped to hotel %s", room.ID, m.Hotel)
			}
			roomKey := func(d string) Key { return Key{Hotel: m.Hotel, Kind: kind, RoomType: room.ID, Date: d} }
			if room.Closed != "" || room.Inventory != nil {
				updates += len(dates)
			}
			for _, d := range dates {
				if room.Closed != "" {
					b, err := strconv.ParseBool(room.Closed)
					if err != nil {
						return refuse(ARParseError, "RoomType closed %q", room.Closed)
					}
					m.put(roomKey(d), "closed", b)
				}
				if room.Inventory != nil {
					n, err := strconv.Atoi(room.Inventory.Total)
					if err != nil || n < 0 {
						return refuse(ARParseError, "totalInventoryAvailable %q", room.Inventory.Total)
					}
					m.put(roomKey(d), "available", n)
				}
			}
			for _, p := range room.Plans {
				updates += len(dates)
				for _, d := range dates {
					k := Key{Hotel: m.Hotel, Kind: kind, RoomType: room.ID, RatePlan: p.ID, Date: d}
					if p.Closed != "" {
						b, err := strconv.ParseBool(p.Closed)
						if err != nil {
							return refuse(ARParseError, "RatePlan closed %q", p.Closed)
						}
						m.put(k, "closed", b)
					}
					if p.Rate != nil {
						if p.Rate.Currency == "" || p.Rate.PerDay == nil {
							return refuse(ARParseError, "Rate needs currency and PerDay")
						}
						m.put(k, "amount", p.Rate.PerDay.Rate)
						m.put(k, "currency", p.Rate.Currency)
					}
					if r := p.Restrictions; r != nil {
						for name, v := range map[string]string{"min_los": r.MinLOS, "max_los": r.MaxLOS} {
							if v != "" {
								n, err := strconv.Atoi(v)
								if err != nil {
									return refuse(ARParseError, "%s %q", name, v)
								}
								m.put(k, name, n)
							}
						}
						for name, v := range map[string]string{"closed_to_arrival": r.CTA, "closed_to_departure": r.CTD} {
							if v != "" {
								b, err := strconv.ParseBool(v)
								if err != nil {
									return refuse(ARParseError, "%s %q", name, v)
								}
								m.put(k, name, b)
							}
						}
					}
				}
			}
		}
	}
	if updates > MaxARUpdates {
		return refuse(ARTooMany, "%d updates in one message, more than %d", updates, MaxARUpdates)
	}
	return m, nil
}
