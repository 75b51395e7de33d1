package otaformat

import (
	"bytes"
	"encoding/xml"
	"fmt"
)

// AnswerOpenTravel is the vendor's answer to an OpenTravel request of the
// given kind: <Success/> when refusal is nil (with <Warnings> if any),
// otherwise <Errors>, one per refused record (or one for the request).
func AnswerOpenTravel(kind string, refusal *Refusal, warnings ...string) []byte {
	root := "OTA_HotelAvailNotifRS"
	if kind == "rates" {
		root = "OTA_HotelRateAmountNotifRS"
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?><%s xmlns="%s" Version="1.0">`, root, OpenTravelNS)
	switch {
	case refusal == nil:
		b.WriteString("<Success/>")
		if len(warnings) > 0 {
			b.WriteString("<Warnings>")
			for _, w := range warnings {
				fmt.Fprintf(&b, `<Warning Type="3" Code="WARN" Status="Processed" ShortText="%s"/>`, esc(w))
			}
			b.WriteString("</Warnings>")
		}
	case len(refusal.RecordIDs) == 0:
		fmt.Fprintf(&b, `<Errors><Error Type="%s" Code="%s" Status="NotProcessed" ShortText="%s"/></Errors>`, refusal.ewt(), esc(refusal.Code), esc(refusal.Text))
	default:
		b.WriteString("<Errors>")
		for _, id := range refusal.RecordIDs {
			fmt.Fprintf(&b, `<Error Type="%s" Code="%s" RecordID="%s" Status="NotProcessed" ShortText="%s"/>`, refusal.ewt(), esc(refusal.Code), esc(id), esc(refusal.Text))
		}
		b.WriteString("</Errors>")
	}
	fmt.Fprintf(&b, "</%s>", root)
	return b.Bytes()
}

// AnswerExpediaAR is Expedia's AvailRateUpdateRS: <Success/> (with
// <Warning>s) or one <Error code>.
func AnswerExpediaAR(refusal *Refusal, warnings ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?><AvailRateUpdateRS xmlns="%s">`, ExpediaARNS)
	if refusal != nil {
		fmt.Fprintf(&b, `<Error code="%s">%s</Error>`, esc(refusal.Code), esc(refusal.Text))
	} else {
		b.WriteString("<Success/>")
		for _, w := range warnings {
			fmt.Fprintf(&b, `<Warning code="4000">%s</Warning>`, esc(w))
		}
	}
	b.WriteString("</AvailRateUpdateRS>")
	return b.Bytes()
}

func (r *Refusal) ewt() string {
	if r.Type == "" {
		return "3"
	}
	return esc(r.Type)
}

func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
