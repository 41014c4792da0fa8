from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class CatalogConfig(AppConfig):
    name = "portal.catalog"
    label = "catalog"
    verbose_name = "Catalog"

    def ready(self):
        from portal.catalog import models
        from portal.catalog.cache import catalog_changed

        for model in (models.GPUModel, models.ServerSKU, models.NvmeOption, models.NetworkOption,
                      models.StorageProvider, models.StackOption, models.PriceList, models.PriceListItem):
            post_save.connect(catalog_changed, sender=model,
                              dispatch_uid=f"catalog-changed-save-{model.__name__}")
            post_delete.connect(catalog_changed, sender=model,
                                dispatch_uid=f"catalog-changed-delete-{model.__name__}")
        models.catalog_rows_updated.connect(catalog_changed, dispatch_uid="catalog-changed-update")
