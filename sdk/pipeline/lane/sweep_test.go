package lane

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestSweepBackoff(t *testing.T) {
	for _, tt := range []struct {
		times int
		want  time.Duration
	}{
		{0, 0}, {1, 0}, {2, 15 * time.Minute}, {3, 30 * time.Minute}, {4, time.Hour},
		{6, 4 * time.Hour}, {7, 4 * time.Hour}, {1000, 4 * time.Hour},
	} {
		if got := SweepBackoff(tt.times); got != tt.want {
			t.Errorf("SweepBackoff(%d) = %v, want %v", tt.times, got, tt.want)
		}
	}
}

// sweepPlan picks the lanes a sweep takes over, and when it looks again.
func TestSweepPlan(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	us := func(t time.Time) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMicro(), 10)}
	}
	n := func(i int) types.AttributeValue { return &types.AttributeValueMemberN{Value: strconv.Itoa(i)} }
	pending := &types.AttributeValueMemberSS{Value: []string{"DBL#BAR#2027-01-01#2027-01-02#7"}}
	lane := func(item map[string]types.AttributeValue, name string, stranded time.Time, times int, lease time.Time, els types.AttributeValue) {
		item["w:"+name], item["f:"+name], item["o:"+name], item["l:"+name] = us(stranded), n(times), &types.AttributeValueMemberS{Value: "t-" + name}, us(lease)
		if els != nil {
			item["d:"+name] = els
		}
	}
	ended := time.UnixMicro(0)
	tests := []struct {
		name string
		item func(map[string]types.AttributeValue)
		due  []string
		next time.Time
	}{
		{"stranded once: due at once", func(it map[string]types.AttributeValue) {
			lane(it, "bk#c1#BK-1", now, 1, ended, pending)
		}, []string{"bk#c1#BK-1"}, time.Time{}},
		{"stranded twice: backs off 15 min", func(it map[string]types.AttributeValue) {
			lane(it, "bk#c1#BK-1", now.Add(-time.Minute), 2, ended, pending)
		}, nil, now.Add(14 * time.Minute)},
		{"backed off long enough: due", func(it map[string]types.AttributeValue) {
			lane(it, "bk#c1#BK-1", now.Add(-31*time.Minute), 3, ended, pending)
		}, []string{"bk#c1#BK-1"}, time.Time{}},
		{"a live owner: looked at again when its lease ends", func(it map[string]types.AttributeValue) {
			lane(it, "bk#c1#BK-1", now.Add(-time.Hour), 1, now.Add(time.Minute), pending)
		}, nil, now.Add(time.Minute + time.Second)},
		{"nothing pending: nothing to do", func(it map[string]types.AttributeValue) {
			lane(it, "bk#c1#BK-1", now, 1, ended, nil)
		}, nil, time.Time{}},
		// An owner listed by the write that gave it its lease (listing)
		// and never heard of again: its invocations died before writing.
		{"never stranded, its owner's lease over: due", func(it map[string]types.AttributeValue) {
			it["d:bk#c1#BK-9"], it["o:bk#c1#BK-9"], it["l:bk#c1#BK-9"] = pending, &types.AttributeValueMemberS{Value: "x"}, us(now.Add(-time.Second))
		}, []string{"bk#c1#BK-9"}, time.Time{}},
		{"never stranded, a live owner: looked at again when its lease ends", func(it map[string]types.AttributeValue) {
			it["d:bk#c1#BK-9"], it["o:bk#c1#BK-9"], it["l:bk#c1#BK-9"] = pending, &types.AttributeValueMemberS{Value: "x"}, us(now.Add(time.Minute))
		}, nil, now.Add(time.Minute + time.Second)},
		{"never stranded, failing: backs off from its lease's end", func(it map[string]types.AttributeValue) {
			it["d:bk#c1#BK-9"], it["o:bk#c1#BK-9"], it["l:bk#c1#BK-9"] = pending, &types.AttributeValueMemberS{Value: "x"}, us(now.Add(-time.Minute))
			it["f:bk#c1#BK-9"] = n(2)
		}, nil, now.Add(14 * time.Minute)},
		{"never stranded, released: nothing to do", func(it map[string]types.AttributeValue) {
			it["v:bk#c1#BK-9"] = n(3)
		}, nil, time.Time{}},
		{"several lanes: the due ones, the earliest of the rest", func(it map[string]types.AttributeValue) {
			lane(it, "bk#c1#BK-1", now, 1, ended, pending)
			lane(it, "ex#c2#EX-1", now.Add(-10*time.Minute), 2, ended, pending)
			lane(it, "ex#c3#EX-2", now, 3, ended, pending)
		}, []string{"bk#c1#BK-1"}, now.Add(5 * time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			item := map[string]types.AttributeValue{}
			tt.item(item)
			due, next, err := sweepPlan(Item{Property: "hotel-1", Kind: "rates"}, item, now)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range due {
				got = append(got, d.Lane.suffix())
				if d.Lane.Property != "hotel-1" || d.Lane.Kind != "rates" || len(d.Pending.Elements) != 1 {
					t.Errorf("due lane %+v, want hotel-1 rates with its element", d)
				}
			}
			if len(got) != len(tt.due) || (len(got) > 0 && got[0] != tt.due[0]) || !next.Equal(tt.next) {
				t.Errorf("due %v, next %v; want %v, %v", got, next, tt.due, tt.next)
			}
		})
	}
}
