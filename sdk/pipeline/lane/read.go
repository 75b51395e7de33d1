package lane

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Read returns what lane id holds now (a strongly consistent read), for an
// operator's view such as a resync's progress: pushes never read a lane
// without writing it.
func (s *Store) Read(ctx context.Context, id ID) (Pending, error) {
	out, err := s.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.Table, Key: key(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Pending{}, fmt.Errorf("read lane %s: %w", id, err)
	}
	return pendingOf(out.Item, id)
}
