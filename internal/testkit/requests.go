package testkit

import "github.com/iqdgateway/gateway/aggregates"

// Deposit is a merchant's deposit request of user for amount on method
// b, as the ledger's and the audit's tests make them.
func Deposit(b *aggregates.Bank, pid, user string, amount int64) aggregates.RequestDeposit {
	return aggregates.RequestDeposit{Request: request(b, pid, user, amount), Lang: "en"}
}

// Withdrawal is a merchant's withdrawal request of user for amount on
// method b, to the account payee.
func Withdrawal(b *aggregates.Bank, pid, user string, amount int64, payee string) aggregates.RequestWithdrawal {
	return aggregates.RequestWithdrawal{Request: request(b, pid, user, amount), AccountName: "Ali Hassan", IBAN: payee}
}

func request(b *aggregates.Bank, pid, user string, amount int64) aggregates.Request {
	return aggregates.Request{ProcessID: pid, Amount: amount, UserID: user, UserName: "user " + user,
		Name: "Ali Hassan", Bank: b, BankRef: b.Code}
}
