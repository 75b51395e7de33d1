package emulator

import (
	"context"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// SecretsManager returns a client on the local stack's Secrets Manager
// (moto's threaded server, AWS_ENDPOINT_URL_SECRETS_MANAGER).
func SecretsManager(tb testing.TB) *secretsmanager.Client {
	tb.Helper()
	cfg := Config(tb)
	if !Brought() && os.Getenv("AWS_ENDPOINT_URL_SECRETS_MANAGER") == "" {
		msg := `AWS_ENDPOINT_URL_SECRETS_MANAGER is not set: run eval "$(scripts/localstack.sh start)" again (it exports it)`
		if os.Getenv("FLEETBUCKET_INTEGRATION") == "1" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return secretsmanager.NewFromConfig(cfg)
}

// NewSecret creates a secret named after the test holding value, deletes
// it when the test ends, and returns its name.
func NewSecret(tb testing.TB, sm *secretsmanager.Client, value string) string {
	tb.Helper()
	name := Name("fleetbucket-test-"+tb.Name(), 255)
	if _, err := sm.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{Name: &name, SecretString: &value}); err != nil {
		tb.Fatalf("create secret: %v", err)
	}
	tb.Cleanup(func() {
		_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: &name, ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	return name
}
