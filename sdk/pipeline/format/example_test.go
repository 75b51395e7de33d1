package format_test

import (
	"fmt"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// A lane's pending availability becomes one OpenTravel request per
// calendar month; the vendor's 200 naming one part refuses just that part,
// and the plan dead-letters the change that holds it and pushes the rest.
func Example() {
	f, _ := format.Lookup("opentravel")
	work := format.Work{
		HotelRef: "1000001",
		Kind:     "availability",
		Secret:   format.NewSecret("channel-manager:s3cret"), // "username:password"
		Cells: []format.Cell{
			{RoomType: "DBL", Days: []ari.Day{
				{Date: "2027-01-31", Sequence: 4, Values: []byte(`{"available":3}`)},
				{Date: "2027-02-01", Sequence: 4, Values: []byte(`{"available":3}`)},
			}},
			{RoomType: "UNMAPPED", Days: []ari.Day{
				{Date: "2027-02-01", Sequence: 5, Values: []byte(`{"closed":true}`)},
			}},
		},
	}
	reqs, err := format.Encode(f, work, format.Shape{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range reqs {
		fmt.Println(r.Method, r.Header.Get("Content-Type"), r.Work.Items(), "items, locators", len(r.Locators))
	}

	answer := format.Response{Status: 200, Body: []byte(`<OTA_HotelAvailNotifRS xmlns="http://www.opentravel.org/OTA/2003/05">
  <Errors><Error Type="3" Code="402" RecordID="2" ShortText="Room ID 'UNMAPPED' is not valid"/></Errors>
</OTA_HotelAvailNotifRS>`)}
	o := f.Decode(reqs[1], answer)
	fmt.Println(o.Verdict, "-", o.Reason)

	// The lane's merged changes in that request, and which the vendor named.
	changes := []struct{ room, from, to string }{{"DBL", "2027-02-01", "2027-02-01"}, {"UNMAPPED", "2027-02-01", "2027-02-01"}}
	var named []int
	for i, c := range changes {
		if o.Names(c.room, "", c.from, c.to) {
			named = append(named, i)
		}
	}
	fmt.Printf("%+v\n", format.PlanFor(o.Verdict, len(changes), named))
	// Output:
	// POST application/xml 1 items, locators 1
	// POST application/xml 2 items, locators 2
	// refused - 402: Room ID 'UNMAPPED' is not valid
	// {DeadLetter:[1] Push:[[0]] Again:false}
}
