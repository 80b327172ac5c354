"""The reference evaluators: plain-Python readings of the definitions (SQL:2016 mode in
sql.py, CEP mode in cep.py), the oracles every evaluator, plan, shared workload plan and
backend is tested against. Nothing in the runtime imports them."""
