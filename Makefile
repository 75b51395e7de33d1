.PHONY: test stack-start stack-stop stack-status

# Every check and test: gofmt, go vet, staticcheck, go test -race with the local stack.
# Extra go test arguments: make test ARGS='-run TestReserve'
test:
	scripts/test.sh $(ARGS)

# Start (or reuse) the local DynamoDB + SQS emulators; then: eval "$$(scripts/localstack.sh env)"
stack-start:
	scripts/localstack.sh start

stack-stop:
	scripts/localstack.sh stop

stack-status:
	scripts/localstack.sh status
