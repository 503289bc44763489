from orders.app import build_app
from orders.clock import FixedClock
from orders.config import Settings
from orders.inventory import StockItem
from orders.models import LineRequest, OrderRequest


def test_build_app_wires_a_working_service(transport, clock: FixedClock) -> None:
    settings = Settings(notification_base_url="http://notify.test", notification_api_key="k")
    app = build_app(settings, [StockItem("MUG-RED", 1250, 3)], transport=transport, clock=clock)

    order = app.service.create_order(OrderRequest("cus_abcd", (LineRequest("MUG-RED", 1),)))

    assert app.repository.get(order.order_id).total_cents == 1500
    assert app.inventory.available("MUG-RED") == 2
    assert transport.requests[0].full_url == "http://notify.test/v1/notifications"
