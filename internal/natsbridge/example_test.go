package natsbridge_test

import (
	"fmt"

	"github.com/larkrun/lark/internal/natsbridge"
)

// The subject of a mirrored event, and back.
func ExampleEventSubject() {
	subject, err := natsbridge.EventSubject("lark.events", "acme", "gts.x.core.faas.audit.v1~x.core.triggers.schedule_created.v1~")
	if err != nil {
		panic(err)
	}
	fmt.Println(subject)
	tenant, typeID, err := natsbridge.ParseEventSubject("lark.events", subject)
	if err != nil {
		panic(err)
	}
	fmt.Println(tenant, typeID)
	// Output:
	// lark.events.acme.gts.x.core.faas.audit.v1.__.x.core.triggers.schedule_created.v1.__
	// acme gts.x.core.faas.audit.v1~x.core.triggers.schedule_created.v1~
}
