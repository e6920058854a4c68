"""A fresh process's first routed intent, ours: import, build a router, route one."""

from intentusnet import IntentRouter

router = IntentRouter()
router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})
answer = router.route_intent({"intent": {"name": "echo"}, "payload": {"x": 1}})
assert answer.status == "success", answer
